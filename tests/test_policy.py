"""Policies: the local HF backend against a freshly built tiny model, the OpenAI backend against a real
HTTP server on 127.0.0.1, and the scripted backends."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from policy_contract import PolicyContract

from coevo import GenerationRequest, SamplingParams
from coevo.policy import make_policy

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hf_policy(tmp_path_factory):
    from coevo.train.model import build_tiny_model

    folder = build_tiny_model(tmp_path_factory.mktemp("model"), REPO / "tasks", seed=0)
    return make_policy({"backend": "hf", "model": str(folder), "device": "cpu"})


def chat_prompts(policy, contents: list[str]) -> list[GenerationRequest]:
    requests = []
    for content in contents:
        messages = [{"role": "system", "content": "You are a shell agent."}, {"role": "user", "content": content}]
        ids = policy.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                   return_dict=True)["input_ids"]
        requests.append(GenerationRequest(token_ids=ids, messages=messages))
    return requests


def training_logprobs(policy, prompt: list[int], completion: list[int], temperature: float) -> list[float]:
    """The completion's logprobs as a training forward scores them: the whole sequence at once, no cache."""
    import torch

    ids = torch.tensor(prompt + completion)[None]
    with torch.inference_mode():
        logits = policy.model(input_ids=ids).logits[0, len(prompt) - 1: -1].float()
    return torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0].tolist()


def test_kv_cached_decoding_matches_a_full_recompute(hf_policy):
    """Three turns of three conversations, each turn's prompt the last one plus its reply and an
    observation (as a rollout's token buffer grows): the cached path re-uses its states (a real hit
    ratio); greedy, it decodes the same tokens as `generate` re-prefilling everything, with the same
    logprobs to float precision; sampled, its logprobs are what a training forward computes, and a seed
    repeats its draws."""
    from coevo.policy.hf import HFPolicy

    plain = HFPolicy(hf_policy.path, device="cpu", kv_cache=False)
    cached = HFPolicy(hf_policy.path, device="cpu")
    again = HFPolicy(hf_policy.path, device="cpu")
    assert plain.decoder is None and cached.decoder is not None
    observation = hf_policy.tokenizer.encode("\n<output>ok</output>\n", add_special_tokens=False)
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    sampled = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=12, seed=7)
    prompts = [r.token_ids for r in chat_prompts(hf_policy, ["list the files", "count the lines", "hi"])]
    for _turn in range(3):
        requests = [GenerationRequest(token_ids=p) for p in prompts]
        a, b = plain.generate(requests, greedy), cached.generate(requests, greedy)
        assert [c.token_ids for c in a] == [c.token_ids for c in b]
        assert [c.logprobs for c in b] == [pytest.approx(c.logprobs, abs=1e-4) for c in a]
        assert all(c.seconds is not None and c.seconds > 0 for c in b)
        s, s2 = cached.generate(requests, sampled), again.generate(requests, sampled)
        assert [c.token_ids for c in s] == [c.token_ids for c in s2]
        for p, c in zip(prompts, s):
            assert c.logprobs == pytest.approx(training_logprobs(cached, p, c.token_ids, 1.0), abs=1e-4)
        prompts = [p + c.token_ids + observation for p, c in zip(prompts, a)]
    assert cached.decoder.stats.hit_ratio > 0.5
    cached.model.load_state_dict(cached.model.state_dict())  # new weights: the kept states are stale
    assert not cached.decoder.cache.entries


def test_the_cached_paths_sampler_draws_from_the_temperature_and_top_p_distribution():
    """200,000 draws from one row of logits: the frequencies are softmax(logits / T) within 4 standard
    errors; with top-p the entries outside the nucleus are never drawn and the rest renormalise."""
    import torch

    from coevo.policy.hf import sampler

    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, -3.0])
    n = 200_000
    for top_p, support in ((1.0, 5), (0.8, 2)):
        torch.manual_seed(0)
        tokens, logprobs = sampler(SamplingParams(temperature=0.7, top_p=top_p, max_tokens=1))(logits.repeat(n, 1))
        p = torch.softmax(logits / 0.7, -1)
        assert torch.allclose(logprobs, p.log()[tokens], atol=1e-5)  # the logprob ignores the top-p cut
        want = torch.zeros(5)
        want[:support] = p[:support] / p[:support].sum()
        freq = torch.bincount(tokens, minlength=5).double() / n
        assert (freq[support:] == 0).all()
        assert ((freq - want).abs() <= 4 * (want * (1 - want) / n).sqrt() + 1e-12).all(), (freq, want)


def test_hf_batch_returns_sampled_ids_and_logprobs(hf_policy):
    requests = chat_prompts(hf_policy, ["list the files", "count the lines of /app/data.txt and print them", "hi"])
    out = hf_policy.generate(requests, SamplingParams(temperature=1.0, max_tokens=24, seed=1))
    assert len(out) == 3
    stop_ids = set(hf_policy.stop_ids)
    for c in out:
        assert 0 < len(c.token_ids) <= 24 and len(c.logprobs) == len(c.token_ids)
        assert all(lp <= 0 and lp > -1e4 for lp in c.logprobs)
        assert hf_policy.pad_id not in c.token_ids[:-1]  # padding stripped; a pad id can only be the stop token
        if c.finish_reason == "stop":
            assert c.token_ids[-1] in stop_ids
        else:
            assert len(c.token_ids) == 24 and not stop_ids & set(c.token_ids)


def test_hf_logprobs_match_a_teacher_forced_forward(hf_policy):
    import numpy as np

    requests = chat_prompts(hf_policy, ["a", "find all the .txt files under /app and print their names"] * 2)
    out = hf_policy.generate(requests, SamplingParams(temperature=1.0, max_tokens=32, seed=7))
    rollout, forward = [], []
    for request, completion in zip(requests, out):
        forward += training_logprobs(hf_policy, request.token_ids, completion.token_ids, 1.0)
        rollout += completion.logprobs
    assert np.corrcoef(rollout, forward)[0, 1] > 0.99
    assert np.abs(np.array(rollout) - np.array(forward)).max() < 1e-3


def test_hf_is_reproducible_with_a_seed(hf_policy):
    requests = chat_prompts(hf_policy, ["x", "print hello world"])
    params = SamplingParams(temperature=1.0, max_tokens=16, seed=123)
    first = hf_policy.generate(requests, params)
    second = hf_policy.generate(requests, params)
    third = hf_policy.generate(requests, SamplingParams(temperature=1.0, max_tokens=16, seed=124))
    assert [c.token_ids for c in first] == [c.token_ids for c in second]
    assert [c.token_ids for c in first] != [c.token_ids for c in third]


def test_hf_greedy_does_not_depend_on_batch_padding(hf_policy):
    short, long = chat_prompts(hf_policy, ["ls", "a much longer prompt, so the short one gets left-padded a lot"])
    params = SamplingParams(temperature=0.0, max_tokens=12)
    alone = hf_policy.generate([short], params)[0]
    batched = hf_policy.generate([long, short], params)[1]
    assert alone.token_ids == batched.token_ids


class ChatServer(BaseHTTPRequestHandler):
    """A real (tiny) OpenAI-compatible endpoint: replies 'echo <last user message>', cut to `max_tokens`
    words (finish_reason "length"), with a logprob per word when the request asks for logprobs."""

    seen: ClassVar[list[dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ChatServer.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        words = ("echo " + body["messages"][-1]["content"]).split(" ")
        cut = len(words) > body["max_tokens"]  # a word stands for a token here
        words = words[: body["max_tokens"]]
        choice = {"index": 0, "finish_reason": "length" if cut else "stop",
                  "message": {"role": "assistant", "content": " ".join(words)}}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": w, "logprob": -0.25, "bytes": None, "top_logprobs": []}
                                              for w in words]}
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"], "choices": [choice]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ChatServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ChatServer.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_policy_against_a_local_server(chat_server, monkeypatch, caplog):
    secret = "sk-test-never-show-this-0123456789"
    monkeypatch.setenv("COEVO_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    policy = make_policy({"backend": "openai", "model": "tiny", "base_url": chat_server,
                          "api_key_env": "COEVO_TEST_KEY"})
    requests = [GenerationRequest(token_ids=[], messages=[{"role": "user", "content": f"task {i}"}])
                for i in range(3)]
    out = policy.generate(requests, SamplingParams(temperature=0.5, max_tokens=20, seed=4))
    assert [c.text for c in out] == ["echo task 0", "echo task 1", "echo task 2"]
    assert all(c.token_ids == [] and c.logprobs == [] and c.finish_reason == "stop" for c in out)
    assert len(ChatServer.seen) == 3 and {s["path"] for s in ChatServer.seen} == {"/v1/chat/completions"}
    assert ChatServer.seen[0]["auth"] == f"Bearer {secret}"
    assert ChatServer.seen[0]["body"]["max_tokens"] == 20 and ChatServer.seen[0]["body"]["seed"] == 4
    assert secret not in repr(policy) and secret not in str(vars(policy)) and secret not in caplog.text


def test_openai_policy_names_a_missing_key_variable(monkeypatch):
    monkeypatch.delenv("COEVO_UNSET_KEY", raising=False)
    with pytest.raises(ValueError, match="COEVO_UNSET_KEY"):
        make_policy({"backend": "openai", "model": "m", "api_key_env": "COEVO_UNSET_KEY"})


def test_scripted_policy_replies_by_turn_with_real_tokens(hf_policy):
    policy = make_policy({"backend": "scripted", "replies": ["ls /app", "submit"], "tokenizer": hf_policy.tokenizer})
    first = GenerationRequest(token_ids=[1], meta={"turn": 0})
    later = GenerationRequest(token_ids=[1], messages=[{"role": "assistant", "content": "x"}] * 3)
    out = policy.generate([first, later], SamplingParams(max_tokens=50))
    assert [c.text for c in out] == ["ls /app", "submit"]
    tok = hf_policy.tokenizer
    assert out[0].token_ids == tok.encode("ls /app", add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    assert out[0].logprobs == [0.0] * len(out[0].token_ids) and out[0].finish_reason == "stop"
    cut = policy.generate([first], SamplingParams(max_tokens=2))[0]
    assert len(cut.token_ids) == 2 and cut.finish_reason == "length"


def test_scripted_policy_takes_a_callable_and_works_without_tokenizer():
    policy = make_policy({"backend": "scripted", "replies": lambda req, turn: f"{req.meta['task']}:{turn}"})
    out = policy.generate([GenerationRequest(token_ids=[], meta={"task": "a", "turn": 2})], SamplingParams())
    assert out[0].text == "a:2" and out[0].token_ids == [] and out[0].logprobs == []


@pytest.mark.parametrize("harness_name", ["mini_bash", "qwen_tools", "terminus_json"])
def test_oracle_solves_a_task_through_each_action_format(harness_name, task, hf_policy):
    """The oracle's replies parse under the harness, its commands run in a real sandbox, the verifier passes."""
    from coevo.harness import load_harness
    from coevo.rollout import rollout

    harness = load_harness(REPO / "harnesses" / f"{harness_name}.yaml")
    oracle = make_policy({"backend": "oracle", "harness": harness, "tasks": [task],
                          "tokenizer": hf_policy.tokenizer})
    [traj] = rollout([task], harness, oracle)
    assert (traj.status, traj.reward, traj.turns, traj.drift) == ("submitted", 1.0, 2, 0)
    assert [m["role"] for m in traj.messages][-1] == "assistant"


def test_oracle_names_an_unknown_task(task):
    from coevo.harness import load_harness

    oracle = make_policy({"backend": "oracle", "harness": load_harness(REPO / "harnesses" / "mini_bash.yaml"),
                          "tasks": [task]})
    with pytest.raises(ValueError, match="'nope'"):
        oracle.generate([GenerationRequest(token_ids=[], meta={"task": "nope", "turn": 0})], SamplingParams())


# -- the policy contract over each backend ------------------------------------------------------------
class TestHFPolicy(PolicyContract):
    @pytest.fixture
    def policy(self, hf_policy):
        return hf_policy

    @pytest.fixture
    def requests(self, hf_policy):
        # An untrained model's greedy replies collapse for most prompts; these three differ (seed 0).
        return chat_prompts(hf_policy, ["list the files", "count the lines of /app/data.txt and print them",
                                        "find all the .txt files under /app and print their names"])


def chat_requests(n: int = 3) -> list[GenerationRequest]:
    return [GenerationRequest(token_ids=[], messages=[{"role": "user", "content": f"task {i} please"}])
            for i in range(n)]


class TestOpenAIPolicy(PolicyContract):
    TOKENS = LOGPROBS = False

    @pytest.fixture
    def policy(self, chat_server):
        return make_policy({"backend": "openai", "model": "tiny", "base_url": chat_server, "api_key_env": None})

    @pytest.fixture
    def requests(self):
        return chat_requests()


class TestOpenAIPolicyWithLogprobs(TestOpenAIPolicy):
    LOGPROBS = True
    """Logprobs per endpoint token, with no token ids beside them: the rollout accepts that for text only."""

    @pytest.fixture
    def policy(self, chat_server):
        return make_policy({"backend": "openai", "model": "tiny", "base_url": chat_server, "api_key_env": None,
                            "logprobs": True})


def by_task(request: GenerationRequest, turn: int) -> str:
    return f"cat /app/{request.meta['task']}.txt # turn {turn}"


def task_requests(names: list[str]) -> list[GenerationRequest]:
    return [GenerationRequest(token_ids=[1], meta={"task": name, "turn": turn}) for turn, name in enumerate(names)]


class TestScriptedPolicy(PolicyContract):
    @pytest.fixture
    def policy(self, hf_policy):
        return make_policy({"backend": "scripted", "replies": by_task, "tokenizer": hf_policy.tokenizer})

    @pytest.fixture
    def requests(self):
        return task_requests(["a", "b", "c"])


class TestScriptedPolicyTextOnly(TestScriptedPolicy):
    TOKENS = LOGPROBS = COUNTS_TOKENS = False
    """Without a tokenizer it has no tokens to count, so it cannot honour max_tokens: it returns the
    scripted text whole, with finish_reason "stop"."""

    @pytest.fixture
    def policy(self):
        return make_policy({"backend": "scripted", "replies": by_task})


class TestOraclePolicy(PolicyContract):
    @pytest.fixture
    def policy(self, make_task, hf_policy):
        from coevo.harness import load_harness
        from coevo.tasks import load_task

        tasks = [load_task(make_task(name, solve_sh=f"echo {name} > /app/answer.txt\n")) for name in "ab"]
        return make_policy({"backend": "oracle", "harness": load_harness(REPO / "harnesses" / "mini_bash.yaml"),
                            "tasks": tasks, "tokenizer": hf_policy.tokenizer})

    @pytest.fixture
    def requests(self):
        return [GenerationRequest(token_ids=[1], meta={"task": task, "turn": turn})
                for task, turn in [("a", 0), ("b", 0), ("b", 1)]]
