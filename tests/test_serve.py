"""`coevo serve` through the official openai client and dspy: a real uvicorn server on 127.0.0.1 over the
tiny model built here. Served replies are checked against the model's own generate."""

from __future__ import annotations

import threading

import pytest
from serve_helpers import MODEL, chat_ids, client, post, serving, tiny_model

from coevo import GenerationRequest, SamplingParams

HI = [{"role": "system", "content": "You are a shell agent."}, {"role": "user", "content": "list the files"}]


@pytest.fixture(scope="module")
def policy():
    from coevo.policy.hf import HFPolicy

    return HFPolicy(tiny_model(), device="cpu")


@pytest.fixture(scope="module")
def served(policy):
    with serving(policy, policy.tokenizer) as (server, app):
        yield server, app.state.served


@pytest.fixture(scope="module")
def api(served):
    return client(served[0])


def test_models_lists_the_served_model(api):
    assert [m.id for m in api.models.list()] == [MODEL]


def test_greedy_chat_is_the_models_own_greedy_generate(api, policy):
    """The server renders with the checkpoint's template and returns exactly the ids and logprobs that a
    direct generate gives, plus vLLM's token-id fields."""
    r = api.chat.completions.create(model=MODEL, messages=HI, temperature=0, max_tokens=12, logprobs=True,
                                    extra_body={"return_token_ids": True})
    prompt = chat_ids(policy.tokenizer, HI)
    direct = policy.generate([GenerationRequest(prompt)], SamplingParams(temperature=0, max_tokens=12))[0]
    extra = r.model_extra
    assert extra["prompt_token_ids"] == prompt
    choice = r.choices[0]
    assert choice.model_extra["token_ids"] == direct.token_ids
    assert choice.message.content == direct.text
    assert [t.logprob for t in choice.logprobs.content] == pytest.approx(direct.logprobs, abs=1e-5)
    assert choice.finish_reason == direct.finish_reason
    assert r.usage.prompt_tokens == len(prompt) and r.usage.completion_tokens == len(direct.token_ids)


def test_completions_take_text_or_token_ids_and_n(api, policy):
    ids = policy.tokenizer.encode("ls -la /app", add_special_tokens=False)
    by_text = api.completions.create(model=MODEL, prompt="ls -la /app", temperature=0, max_tokens=6,
                                     extra_body={"return_token_ids": True})
    by_ids = api.completions.create(model=MODEL, prompt=ids, temperature=0, max_tokens=6, logprobs=1,
                                    extra_body={"return_token_ids": True})
    assert by_text.choices[0].text == by_ids.choices[0].text
    assert by_ids.choices[0].model_extra["prompt_token_ids"] == ids
    lp = by_ids.choices[0].logprobs
    assert len(lp.token_logprobs) == len(by_ids.choices[0].model_extra["token_ids"]) == 6
    assert "".join(lp.tokens) == by_ids.choices[0].text
    many = api.completions.create(model=MODEL, prompt=[ids, ids[:3]], n=2, max_tokens=4, seed=3)
    assert [c.index for c in many.choices] == [0, 1, 2, 3]


def test_sampling_parameters_are_honoured(api):
    def ask(**kw):
        r = api.chat.completions.create(model=MODEL, messages=HI, extra_body={"return_token_ids": True}, **kw)
        return [(c.message.content, c.model_extra["token_ids"], c.finish_reason) for c in r.choices]

    seeded = ask(temperature=1.0, top_p=0.9, max_tokens=10, seed=11, n=3)
    assert seeded == ask(temperature=1.0, top_p=0.9, max_tokens=10, seed=11, n=3)
    assert len({tuple(ids) for _, ids, _ in seeded}) > 1, "three samples of a random model were identical"
    assert seeded != ask(temperature=1.0, top_p=0.9, max_tokens=10, seed=12, n=3)
    assert all(len(ids) == 3 and finish == "length" for _, ids, finish in ask(max_tokens=3, temperature=0))
    text, ids, _ = ask(temperature=0, max_tokens=16)[0]
    stop = text[len(text) // 2: len(text) // 2 + 2]
    cut_text, cut_ids, finish = ask(temperature=0, max_tokens=16, stop=[stop])[0]
    assert finish == "stop" and cut_text == text[: text.index(stop)] and cut_ids == ids[: len(cut_ids)]


def test_streaming_yields_the_same_reply_token_by_token(api):
    whole = api.chat.completions.create(model=MODEL, messages=HI, temperature=0, max_tokens=10, logprobs=True,
                                        extra_body={"return_token_ids": True}).choices[0]
    chunks = list(api.chat.completions.create(model=MODEL, messages=HI, temperature=0, max_tokens=10, stream=True,
                                              logprobs=True, stream_options={"include_usage": True},
                                              extra_body={"return_token_ids": True}))
    deltas = [c.choices[0] for c in chunks if c.choices]
    assert len(deltas) >= 10, "the reply did not arrive token by token"
    assert "".join(d.delta.content or "" for d in deltas) == whole.message.content
    assert [t for d in deltas for t in d.model_extra["token_ids"]] == whole.model_extra["token_ids"]
    streamed = [t.logprob for d in deltas if d.logprobs for t in d.logprobs.content]
    assert streamed == pytest.approx([t.logprob for t in whole.logprobs.content], abs=1e-5)
    assert deltas[-1].finish_reason == whole.finish_reason
    assert chunks[-1].usage.completion_tokens == len(whole.model_extra["token_ids"])


def test_streamed_completion_holds_back_a_stop_string(api):
    text = api.completions.create(model=MODEL, prompt="cat /app/", temperature=0, max_tokens=12).choices[0].text
    stop = text[4:7]
    parts = list(api.completions.create(model=MODEL, prompt="cat /app/", temperature=0, max_tokens=12,
                                        stop=stop, stream=True))
    assert "".join(p.choices[0].text for p in parts) == text[: text.index(stop)]
    assert parts[-1].choices[0].finish_reason == "stop"


def test_concurrent_requests_share_generate_calls(served, api):
    engine = served[1].engine
    before = len(engine.calls)
    replies = [None] * 8
    def ask(i):
        replies[i] = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": f"task {i}"}],
                                                 temperature=0.8, max_tokens=8)
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    calls = engine.calls[before:]
    assert sum(calls) == 8 and all(r is not None for r in replies)
    assert max(calls) > 1, f"8 concurrent requests ran as {calls}"


def test_bad_requests_get_openai_error_bodies(api, served):
    import openai

    cases = [
        ({"model": "gpt-9", "messages": HI}, openai.NotFoundError, "model_not_found"),
        ({"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}, openai.BadRequestError, None),
        ({"model": MODEL, "messages": [{"content": "no role"}]}, openai.BadRequestError, None),
        ({"model": MODEL, "messages": HI, "max_tokens": 5000}, openai.BadRequestError, "context_length_exceeded"),
        ({"model": MODEL, "messages": [{"role": "user", "content": "ls " * 5000}]}, openai.BadRequestError,
         "context_length_exceeded"),
    ]
    for kwargs, error, code in cases:
        with pytest.raises(error) as caught:
            api.chat.completions.create(**kwargs)
        body = caught.value.body
        assert set(body) >= {"message", "type", "param", "code"} and body["message"], body
        assert body["code"] == code, body
    with pytest.raises(openai.BadRequestError, match="messages.0.role"):
        api.chat.completions.create(model=MODEL, messages=[{"role": "robot", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match=r"token ids must lie in \[0, "):
        api.completions.create(model=MODEL, prompt=[10**6])
    status, body = post(served[0].url + "/v1/chat/completions", b"{not json")
    assert status == 400 and body["error"]["message"] == "The body is not valid JSON."
    status, body = post(served[0].url + "/v2/nothing", b"{}")
    assert status == 404 and body["error"]["type"] == "invalid_request_error"


def test_dspy_predict_answers_through_the_server(policy):
    """A scripted policy behind the server answers in dspy's chat format; the Predict parses it."""
    import dspy

    from coevo.policy.scripted import ScriptedPolicy

    def answer(request: GenerationRequest, turn: int) -> str:
        asked = "What does ls list?" in request.messages[-1]["content"]
        return f"[[ ## answer ## ]]\nthe files (question seen: {asked})\n\n[[ ## completed ## ]]"

    with serving(ScriptedPolicy(answer, policy.tokenizer), policy.tokenizer) as (server, _):
        lm = dspy.LM(f"openai/{MODEL}", api_base=server.url + "/v1", api_key="unused", temperature=0,
                     max_tokens=100, cache=False, num_retries=0)
        with dspy.context(lm=lm):
            result = dspy.Predict("question -> answer")(question="What does ls list?")
    assert result.answer == "the files (question seen: True)"


def test_a_failing_generate_is_a_500_and_the_server_goes_on(policy):
    import openai

    from coevo.policy.scripted import ScriptedPolicy

    def reply(request: GenerationRequest, turn: int) -> str:
        if "boom" in request.messages[-1]["content"]:
            raise RuntimeError("the policy broke")
        return "fine"

    with serving(ScriptedPolicy(reply, policy.tokenizer), policy.tokenizer) as (server, _):
        api = client(server)
        boom = [{"role": "user", "content": "boom"}]
        with pytest.raises(openai.InternalServerError) as caught:
            api.chat.completions.create(model=MODEL, messages=boom)
        assert caught.value.body["type"] == "server_error" and "the policy broke" in caught.value.body["message"]
        with pytest.raises(openai.APIError, match="the policy broke"):
            list(api.chat.completions.create(model=MODEL, messages=boom, stream=True))
        ok = api.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        assert ok.choices[0].message.content == "fine"
