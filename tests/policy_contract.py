"""The policy contract, written once for every backend (as tests/sandbox_contract.py is for sandboxes).

A backend's test class subclasses `PolicyContract` and provides two fixtures: `policy`, and `requests`,
three or more requests that this backend can answer and whose replies differ (so that an order mix-up
shows). Class attributes say what the backend returns; everything runs for real.
"""

from __future__ import annotations

import math

import pytest

from coevo import Completion, SamplingParams
from coevo.policy.hf import STOP_TOKENS

SAMPLED = SamplingParams(temperature=1.0, max_tokens=24, seed=3)


class PolicyContract:
    TOKENS = True
    """Completions carry the sampled token ids (and `policy.tokenizer` decodes them); else text only."""
    LOGPROBS = True
    """Completions carry logprobs; a text-only backend carries the endpoint's, or none."""
    COUNTS_TOKENS = True
    """The backend cuts a reply at `max_tokens` and says so with finish_reason "length"."""

    def test_an_empty_batch_returns_an_empty_list(self, policy):
        assert policy.generate([], SAMPLED) == []

    def test_one_completion_per_request_in_order(self, policy, requests):
        greedy = SamplingParams(temperature=0.0, max_tokens=16)
        batch = policy.generate(requests, greedy)
        alone = [policy.generate([r], greedy)[0] for r in requests]
        assert all(isinstance(c, Completion) and isinstance(c.text, str) for c in batch)
        assert len({c.text for c in alone}) == len(requests), "the fixture's requests must get different replies"
        assert [(c.text, c.token_ids) for c in batch] == [(c.text, c.token_ids) for c in alone]

    def test_finish_reason_is_stop_or_length(self, policy, requests):
        assert {c.finish_reason for c in policy.generate(requests, SAMPLED)} <= {"stop", "length"}

    def test_token_ids_decode_to_the_text(self, policy, requests):
        """Exactly the sampled ids: the text decodes from them, and a stop token appears only at the end
        of a "stop" completion (the token buffer keeps it; the text does not)."""
        for c in policy.generate(requests, SAMPLED):
            if not self.TOKENS:
                assert c.token_ids == []
                continue
            tokens = policy.tokenizer.convert_ids_to_tokens(c.token_ids)
            stops = [i for i, t in enumerate(tokens) if t in STOP_TOKENS]
            assert stops == ([len(tokens) - 1] if c.finish_reason == "stop" else []), tokens
            body = c.token_ids[:-1] if c.finish_reason == "stop" else c.token_ids
            assert policy.tokenizer.decode(body, skip_special_tokens=False) == c.text

    def test_logprobs_one_per_token_and_never_positive(self, policy, requests):
        for c in policy.generate(requests, SAMPLED):
            assert all(math.isfinite(lp) and lp <= 0 for lp in c.logprobs), c.logprobs
            if self.TOKENS:
                assert len(c.logprobs) == len(c.token_ids) > 0
            else:
                assert bool(c.logprobs) == self.LOGPROBS

    def test_max_tokens_is_respected(self, policy, requests):
        if not self.COUNTS_TOKENS:
            pytest.skip("this backend has no tokens to count (the subclass says why)")
        for limit in (1, 6):
            out = policy.generate(requests, SamplingParams(temperature=1.0, max_tokens=limit, seed=5))
            assert all(len(c.token_ids) <= limit for c in out)
            cut = [c for c in out if c.finish_reason == "length"]
            if self.TOKENS:
                assert all(len(c.token_ids) == limit for c in cut)
            if limit == 1:
                assert cut, "a one-token limit cut no reply"

    def test_a_seed_reproduces_the_batch(self, policy, requests):
        """The same tokens; logprobs to float precision (a second call may re-use the first's KV states)."""
        first, again = policy.generate(requests, SAMPLED), policy.generate(requests, SAMPLED)
        assert [(c.text, c.token_ids, c.finish_reason) for c in first] == \
            [(c.text, c.token_ids, c.finish_reason) for c in again]
        assert [c.logprobs for c in again] == [pytest.approx(c.logprobs, abs=1e-4) for c in first]
