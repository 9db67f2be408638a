"""Sessions: every call made through `/sessions/{id}/v1` becomes part of a coevo Trajectory, token in and
token out. A scripted policy makes the replies known; the tiny model makes them random, and still every
sampled id must land in the record unchanged."""

from __future__ import annotations

import pytest
from serve_helpers import MODEL, chat_ids, client, serving, tiny_model

from coevo.rollout.trajectory import Trajectory

SYSTEM = {"role": "system", "content": "You are a shell agent."}
REPLIES = ["ls /app", "cat /app/input.txt", "echo 42 > /app/answer.txt"]


@pytest.fixture(scope="module")
def model_dir():
    return tiny_model()


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def server(tokenizer):
    from coevo.policy.scripted import ScriptedPolicy

    with serving(ScriptedPolicy(REPLIES, tokenizer), tokenizer, harness="scripted") as (server, _):
        yield server


def read(server, session: str, method: str = "GET") -> list[Trajectory]:
    import json
    import urllib.request

    request = urllib.request.Request(f"{server.url}/sessions/{session}", method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        return [Trajectory.model_validate(t) for t in json.loads(response.read())["trajectories"]]


def play(api, turns: int) -> tuple[list[dict], list]:
    """An agent loop as a client writes it: the chat grows by the reply and an observation per turn."""
    messages, replies = [SYSTEM, {"role": "user", "content": "Write 42 to /app/answer.txt."}], []
    for turn in range(turns):
        reply = api.chat.completions.create(model=MODEL, messages=messages, max_tokens=32,
                                            extra_body={"return_token_ids": True})
        replies.append(reply)
        messages = [*messages, {"role": "assistant", "content": reply.choices[0].message.content},
                    {"role": "user", "content": f"output of turn {turn}"}]
    return messages, replies


def test_a_session_is_one_trajectory_of_exactly_the_sampled_tokens(server, tokenizer):
    _, replies = play(client(server, "/sessions/episode-1/v1"), 3)
    [trajectory] = read(server, "episode-1")
    assert trajectory.task == "episode-1" and trajectory.harness == "scripted"
    assert trajectory.prompt_ids == replies[0].model_extra["prompt_token_ids"]
    sampled = [t for r in replies for t in r.choices[0].model_extra["token_ids"]]
    assert trajectory.model_tokens == sampled
    last = replies[-1]
    assert trajectory.prompt_ids + trajectory.completion_ids == (last.model_extra["prompt_token_ids"]
                                                                 + last.choices[0].model_extra["token_ids"])
    env = [t for t, m in zip(trajectory.completion_ids, trajectory.completion_mask) if not m]
    assert tokenizer.decode(env) == "".join(f"\n<|im_start|>user\noutput of turn {i}<|im_end|>\n<|im_start|>assistant\n"
                                            for i in range(2))
    assert len(trajectory.logprobs) == len(trajectory.completion_ids)
    assert all(lp == 0.0 for lp, m in zip(trajectory.logprobs, trajectory.completion_mask) if not m)
    assert (trajectory.turns, trajectory.drift, trajectory.tokens) == (3, 0, len(sampled))
    assert [s.reply for s in trajectory.steps] == REPLIES
    assert trajectory.messages[-1] == {"role": "assistant", "content": REPLIES[2]}


def test_a_rerendered_history_starts_a_new_segment_and_records_the_drift(server):
    api = client(server, "/sessions/episode-2/v1")
    messages, _ = play(api, 2)
    trimmed = [SYSTEM, *messages[3:]]  # the client dropped its first turn to save context
    reply = api.chat.completions.create(model=MODEL, messages=trimmed, extra_body={"return_token_ids": True})
    first, second = read(server, "episode-2", method="DELETE")
    assert first.turns == 2 and first.drift > 0
    assert second.prompt_ids == reply.model_extra["prompt_token_ids"]
    assert second.model_tokens == reply.choices[0].model_extra["token_ids"] and second.drift == 0
    assert "episode-2" not in server.app.state.served.sessions.ids()


def test_a_token_mode_session_over_completions(server, tokenizer):
    """A client that keeps its own buffer (vLLM style) sends ids and gets ids: the observation it appends
    enters as environment tokens."""
    api = client(server, "/sessions/episode-3/v1")
    prompt = chat_ids(tokenizer, [SYSTEM, {"role": "user", "content": "go"}])
    first = api.completions.create(model=MODEL, prompt=prompt, max_tokens=32, extra_body={"return_token_ids": True})
    observation = tokenizer.encode("\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    buffer = prompt + first.choices[0].model_extra["token_ids"] + observation
    api.completions.create(model=MODEL, prompt=buffer, max_tokens=32)
    [trajectory] = read(server, "episode-3")
    assert trajectory.completion_mask.count(0) == len(observation) and trajectory.turns == 2
    assert trajectory.prompt_ids + trajectory.completion_ids[: len(buffer) - len(prompt)] == buffer


def test_session_errors(server):
    import urllib.error

    import openai

    with pytest.raises(openai.BadRequestError, match="one episode"):
        client(server, "/sessions/x/v1").chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], n=2)
    with pytest.raises(urllib.error.HTTPError) as caught:
        read(server, "never-called")
    assert caught.value.code == 404


def test_the_tiny_models_random_tokens_are_recorded_unchanged(model_dir):
    """Streamed random tokens, which the template would re-tokenize differently: the client sends its chat
    back unchanged, so the server continues from its own ids and the episode stays one segment."""
    from coevo.policy.hf import HFPolicy

    policy = HFPolicy(model_dir, device="cpu")
    with serving(policy, policy.tokenizer) as (server, app):
        api = client(server, "/sessions/random/v1")
        messages, sampled = [SYSTEM, {"role": "user", "content": "list the files"}], []
        for turn in range(3):
            chunks = api.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, seed=turn,
                                                 stream=True, extra_body={"return_token_ids": True})
            parts = [c.choices[0] for c in chunks if c.choices]
            sampled.append([t for p in parts for t in p.model_extra["token_ids"]])
            reply = "".join(p.delta.content or "" for p in parts)
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"turn {turn}"}]
        segments = app.state.served.sessions.pop("random")
    [segment] = segments
    assert segment.model_tokens == [t for ids in sampled for t in ids]
    assert (segment.turns, segment.drift) == (3, 0)
    rendered = chat_ids(policy.tokenizer, messages[:-1])
    assert rendered != segment.prompt_ids + segment.completion_ids[: len(rendered)], \
        "the replies re-tokenized the same: this test would not show that sampled ids are kept"
