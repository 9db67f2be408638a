"""Constrained action decoding (`action_format.constrained`) with the real SmolLM2: every reply it samples
under a format's grammar parses; a reply the grammar cannot finish is a recorded format error in a real
episode; the rollout's logprobs are the masked distribution's, which a training forward reproduces once
the masks are replayed; and a grammar that a harness cannot have is refused at load time."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo import GenerationRequest, SamplingParams
from coevo.harness import FormatError, HarnessError, load_harness, parse_action
from coevo.harness.grammar import accepts, action_grammar, compile_bytes
from coevo.harness.prompts import instance_prompt, system_prompt
from coevo.rollout import rollout
from coevo.tasks import load_task

REPO = Path(__file__).resolve().parents[1]
FORMATS = {"bash_block": "mini_bash", "json": "terminus_json", "tool_call": "qwen_tools"}


@pytest.fixture(scope="module")
def smollm2():
    from coevo.policy.hf import HFPolicy

    return HFPolicy("smollm2-135m", device="cpu")


def constrained(name: str, **overrides):
    return load_harness(REPO / "harnesses" / f"{name}.yaml").with_overrides(
        {"action_format.constrained": True, **overrides})


def task_prompt(policy, harness, task_name: str) -> list[int]:
    task = load_task(REPO / "tasks" / task_name)
    messages = [{"role": "system", "content": system_prompt(harness)},
                {"role": "user", "content": instance_prompt(harness, task.instruction, task.name, None)}]
    return policy.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                return_dict=True)["input_ids"]


@pytest.mark.parametrize("kind", list(FORMATS))
def test_a_constrained_reply_always_parses(smollm2, kind):
    """Six replies at temperature 1 to two bundled tasks' real prompts, half through the KV-cached decoder
    and half through transformers' `generate`: each that ends ends on <|im_end|> and parses into tool
    calls; one cut at max_tokens before its action is complete does not parse (the episode makes it a
    format error)."""
    h = constrained(FORMATS[kind])
    prompts = [task_prompt(smollm2, h, name) for name in ("create-file-000", "word-count-000")]
    params = SamplingParams(temperature=1.0, max_tokens=40, seed=11, grammar=action_grammar(h))
    decoder, smollm2.decoder = smollm2.decoder, None
    try:
        plain = smollm2.generate([GenerationRequest(token_ids=prompts[0])], params)
    finally:
        smollm2.decoder = decoder
    replies = plain + smollm2.generate([GenerationRequest(token_ids=p) for p in prompts for _ in range(2)], params)
    assert {c.logprob_source for c in replies} == {"constrained"}
    assert any(c.finish_reason == "stop" for c in replies)
    for c in replies:
        if c.finish_reason == "stop":
            assert c.token_ids[-1] == smollm2.stop_ids[0]
        if c.finish_reason == "stop" or accepts(compile_bytes(params.grammar), c.text.encode()):
            assert parse_action(h, c.text), c.text  # cut right after the action's last token: it parses too
        else:
            with pytest.raises(FormatError):
                parse_action(h, c.text)


def test_a_reply_the_grammar_cannot_finish_is_a_format_error(smollm2, task):
    """Three tokens cannot hold a ```bash block: every reply comes back cut ("length"), and the real episode
    records each as a format error and ends with 'format_errors', never a crash."""
    h = constrained("mini_bash", **{"limits.max_tokens_per_turn": 3, "recovery.max_format_retries": 1})
    [t] = rollout([task], h, smollm2, seed=0)
    assert (t.status, t.turns, t.format_errors) == ("format_errors", 2, 2)
    assert all(s.format_error for s in t.steps) and t.logprob_source == "constrained"


def test_constrained_logprobs_match_the_masked_training_forward(smollm2, task, tmp_path):
    """A real constrained episode's logprobs are the masked distribution's: a training forward with the
    replayed masks gives them to ~1e-4; without the masks it gives less wherever the model put mass
    outside the grammar. The trajectory says so, and keeps saying so when read back."""
    from coevo.rollout import load_trajectories, save_trajectories
    from coevo.train import mismatch as mm

    h = constrained("terminus_json", **{"limits.max_turns": 2, "limits.max_tokens_per_turn": 40})
    [t] = rollout([task], h, smollm2, seed=3)
    [t] = load_trajectories(save_trajectories(tmp_path / "t.jsonl", [t]))
    assert t.logprob_source == "constrained" and sum(t.completion_mask) > 10
    masked, plain = mm.grammar_logprobs(smollm2.model, [t.prompt_ids], [t.completion_ids], [t.completion_mask],
                                        action_grammar(h), smollm2.tokenizer, h.decoding.temperature,
                                        smollm2.stop_ids[0])
    model = [i for i, m in enumerate(t.completion_mask) if m]
    assert [masked[0][i] for i in model] == pytest.approx([t.logprobs[i] for i in model], abs=1e-4)
    assert all(plain[0][i] <= masked[0][i] + 1e-4 for i in model)
    gap, metrics = mm.constrained_metrics(masked, plain, [t.logprobs], [t.completion_mask])
    assert gap.max_abs_diff < 1e-4 and metrics["mismatch/unmasked/mean_abs_diff"] > 1e-3


def test_unconstrained_decoding_is_untouched(smollm2):
    """constrained: false sends no grammar, and the model's own distribution is what the logprobs describe:
    greedy replies and their logprobs equal a training forward's, as before this feature."""
    import torch

    h = load_harness(REPO / "harnesses" / "mini_bash.yaml")
    assert not h.action_format.constrained
    prompt = task_prompt(smollm2, h, "create-file-000")
    [c] = smollm2.generate([GenerationRequest(token_ids=prompt)], SamplingParams(temperature=0.0, max_tokens=12))
    assert c.logprob_source == "model"
    with torch.inference_mode():
        logits = smollm2.model(input_ids=torch.tensor([prompt + c.token_ids])).logits[0, len(prompt) - 1: -1]
    assert c.token_ids == logits.argmax(-1).tolist()
    assert c.logprobs == pytest.approx(torch.log_softmax(logits, -1).max(-1).values.tolist(), abs=1e-4)


def test_a_grammar_the_harness_cannot_have_is_refused_at_load(tmp_path):
    """A submit command with a backtick would end the ```bash block early: loading says which file and field."""
    path = tmp_path / "h.yaml"
    path.write_text("action_format: {kind: bash_block, constrained: true, submit_command: 'echo `done`'}\n"
                    "tools: {bash: {enabled: true}, submit: {enabled: true}}\n")
    with pytest.raises(HarnessError, match=r"h\.yaml.*action_format\.constrained"):
        load_harness(path)


def test_serve_applies_a_requested_grammar():
    """`coevo serve` takes vLLM's `structured_outputs.grammar` (and `guided_grammar`) through the same HF
    path: the reply is the grammar's one sentence, marked as sampled under it; a grammar that does not
    parse is a 400 naming the field."""
    import json

    from serve_helpers import MODEL, post, serving, tiny_model

    from coevo.policy.hf import HFPolicy

    policy = HFPolicy(tiny_model(), device="cpu")
    grammar = 'root ::= "```bash\\nls\\n```"'
    with serving(policy, policy.tokenizer) as (server, _):
        url = server.url + "/v1/completions"
        for field in ({"structured_outputs": {"grammar": grammar}}, {"guided_grammar": grammar}):
            body = {"model": MODEL, "prompt": "hello", "max_tokens": 16, "logprobs": 1, **field}
            status, out = post(url, json.dumps(body).encode())
            choice = out["choices"][0]
            assert (status, choice["text"], choice["finish_reason"]) == (200, "```bash\nls\n```", "stop")
            assert choice["logprob_source"] == "constrained"
        body = {"model": MODEL, "prompt": "hello", "structured_outputs": {"grammar": "root ::= oops"}}
        status, out = post(url, json.dumps(body).encode())
        assert status == 400 and "grammar" in json.dumps(out)
