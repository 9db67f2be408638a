"""The FastAPI app: OpenAI-compatible routes at `/v1` and, recorded per episode, at `/sessions/{id}/v1`.

Handlers only turn requests into engine jobs and completions into responses; batching lives in
engine.py, recording in sessions.py, streaming in stream.py, error bodies in errors.py.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, Request
from pydantic import ValidationError

from coevo import Completion
from coevo.rollout.tokens import ChatTemplate
from coevo.serve.engine import BatchingEngine, Job
from coevo.serve.errors import APIError, bad_request, from_validation
from coevo.serve.protocol import (
    ChatRequest,
    CompletionRequest,
    chat_logprobs,
    envelope,
    finish_reason,
    new_id,
    source,
    text_logprobs,
    usage,
)
from coevo.serve.sessions import SessionStore


@dataclass
class Served:
    """What the routes share: the model's name, its tokenizer's chat template, the engine, the sessions."""

    model: str
    chat: ChatTemplate
    engine: BatchingEngine
    sessions: SessionStore
    context_length: int
    default_max_tokens: int

    @property
    def vocab_size(self) -> int:
        """Ids a prompt may hold: the model's embedding rows, which can outnumber the tokenizer's tokens (the
        tiny model rounds them up), and the model samples any of them; else the tokenizer's."""
        policy = self.engine.policy
        config = getattr(getattr(policy, "model", None), "config", None)
        rows = getattr(policy, "vocab_size", None) or getattr(config, "vocab_size", 0) or 0  # vllm: no model here
        return max(len(self.chat.tokenizer), rows)

    def check_model(self, name: str) -> None:
        if name != self.model:
            raise APIError(404, f"The model `{name}` does not exist: this server serves `{self.model}`.",
                           param="model", code="model_not_found")

    def budget(self, prompt_tokens: int, asked: int | None) -> int:
        """max_tokens for a prompt: as asked, or the default, within the context; too long is a 400."""
        room = self.context_length - prompt_tokens
        if room < 1 or (asked is not None and asked > room):
            raise bad_request(f"This model's maximum context length is {self.context_length} tokens. However, you "
                              f"requested {prompt_tokens + (asked or 1)} tokens ({prompt_tokens} in the prompt, "
                              f"{asked or 1} for the completion). Please reduce the prompt or max_tokens.",
                              param="messages", code="context_length_exceeded")
        return asked if asked is not None else min(room, self.default_max_tokens)

    def tokens(self, ids: list[int]) -> list[str]:
        return [self.chat.decode([t]) for t in ids]

    async def run(self, job: Job) -> list[Completion]:
        job.loop, job.events = asyncio.get_running_loop(), asyncio.Queue()
        self.engine.submit(job)
        if job.stream:
            return []
        event = await job.events.get()
        if event[0] == "error":
            raise APIError(500, f"generation failed: {event[1]}", kind="server_error")
        return event[1]


async def parse(request, model):
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise bad_request("The body is not valid JSON.") from None
    try:
        return model.model_validate(body)
    except ValidationError as e:
        raise from_validation(e) from None


def render(served: Served, body: ChatRequest) -> tuple[list[dict], list[int]]:
    """The chat through the checkpoint's own chat template, tokenized once."""
    from jinja2 import TemplateError

    if body.tools:
        raise bad_request("tools: this server has no tool calling; describe the tools in the prompt", param="tools")
    messages = [m.for_template() for m in body.messages]
    try:
        text = served.chat.render(messages, generation_prompt=True)
    except TemplateError as e:
        raise bad_request(f"messages: the model's chat template refused them: {e}", param="messages") from None
    return messages, served.chat.encode(text)


def prompt_ids(served: Served, prompt) -> list[list[int]]:
    """A completions `prompt` (text or ids, one or a list) as a list of token-id prompts."""
    prompts = [prompt] if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)) else list(prompt)
    if not prompts:
        raise bad_request("prompt: empty", param="prompt")
    out = [served.chat.encode(p) if isinstance(p, str) else list(p) for p in prompts]
    vocab = served.vocab_size
    for ids in out:
        if not ids:
            raise bad_request("prompt: an empty prompt has nothing to continue", param="prompt")
        if not all(0 <= t < vocab for t in ids):
            raise bad_request(f"prompt: token ids must lie in [0, {vocab})", param="prompt")
    return out


async def chat_completions(served: Served, request, session: str | None):
    from coevo.serve.stream import chat_stream

    body = await parse(request, ChatRequest)
    served.check_model(body.model)
    if session is not None and body.n > 1:
        raise bad_request("n: a session records one episode, so n must be 1", param="n")
    messages, prompt = render(served, body)
    if session is not None:  # the session's own ids, when the chat continues it (see sessions.py)
        prompt = served.sessions.chat_prompt(session, messages) or prompt
    max_tokens = served.budget(len(prompt), body.max_completion_tokens or body.max_tokens)
    job = Job([prompt], body.sampling(max_tokens), body.n, body.stops(), messages, stream=body.stream)
    done = await served.run(job)
    if body.stream:
        return chat_stream(served, job, body, prompt, session)
    if session is not None:
        served.sessions.record(session, prompt, done[0], messages)
    choices = [{"index": i, "message": {"role": "assistant", "content": c.text},
                "logprobs": chat_logprobs(served.tokens(c.token_ids), c.logprobs) if body.logprobs else None,
                "finish_reason": finish_reason(c), **({"token_ids": c.token_ids} if body.return_token_ids else {}),
                **source(c)}
               for i, c in enumerate(done)]
    return envelope("chat.completion", new_id("chatcmpl"), served.model, choices, usage=usage(len(prompt), done),
                    prompt_token_ids=prompt if body.return_token_ids else None)


async def completions(served: Served, request, session: str | None):
    from coevo.serve.stream import completion_stream

    body = await parse(request, CompletionRequest)
    served.check_model(body.model)
    prompts = prompt_ids(served, body.prompt)
    if session is not None and (body.n > 1 or len(prompts) > 1):
        raise bad_request("a session records one episode: one prompt, and n must be 1", param="n")
    max_tokens = max(served.budget(len(p), body.max_tokens) for p in prompts)
    job = Job(prompts, body.sampling(max_tokens), body.n, body.stops(), stream=body.stream)
    done = await served.run(job)
    if body.stream:
        return completion_stream(served, job, body, prompts, session)
    if session is not None:
        served.sessions.record(session, prompts[0], done[0], [])
    choices = []
    for i, c in enumerate(done):
        ids = ({"prompt_token_ids": prompts[i // body.n], "token_ids": c.token_ids} if body.return_token_ids else {})
        logprobs = text_logprobs(served.tokens(c.token_ids), c.logprobs) if body.logprobs is not None else None
        choices.append({"index": i, "text": c.text, "logprobs": logprobs, "finish_reason": finish_reason(c), **ids,
                        **source(c)})
    prompt_tokens = sum(len(p) for p in prompts)
    return envelope("text_completion", new_id("cmpl"), served.model, choices, usage=usage(prompt_tokens, done))


def create_app(policy, tokenizer, model: str, *, context_length: int, api_key: str | None = None,
               default_max_tokens: int = 512, window_s: float = 0.005, max_rows: int = 64, harness: str = "served",
               sessions_dir: Path | None = None):
    """The app over a coevo Policy (the local HF model, or a scripted one for tests) and its tokenizer.
    `sessions_dir`: the sessions' journal (see sessions.py); None keeps them in memory only.

    `api_key`: when set, every route needs `Authorization: Bearer <key>`. The key is compared in constant
    time and never written anywhere (no repr, log line or error message holds it).
    """
    from coevo.policy.hf import HFPolicy, stop_token_ids
    from coevo.serve.errors import install_handlers

    chat = ChatTemplate(tokenizer)
    engine = BatchingEngine(policy, chat, stop_token_ids(tokenizer), window_s=window_s, max_rows=max_rows,
                            streams=isinstance(policy, HFPolicy))
    served = Served(model, chat, engine, SessionStore(chat, harness, sessions_dir), context_length, default_max_tokens)

    async def lifespan(app):
        engine.start()
        yield
        engine.stop()

    app = FastAPI(title="coevo serve", lifespan=lifespan)
    app.state.served = served
    install_handlers(app)
    v1, sessions = routers(served, Depends(bearer_check(api_key)))
    app.include_router(v1, prefix="/v1")
    app.include_router(v1, prefix="/sessions/{session}/v1")
    app.include_router(sessions)
    return app


def bearer_check(api_key: str | None):
    def bearer(request: Request) -> None:
        given = request.headers.get("authorization", "").encode()
        if api_key is not None and not secrets.compare_digest(given, f"Bearer {api_key}".encode()):
            raise APIError(401, "Incorrect or missing API key: send it as the header 'Authorization: Bearer KEY'.",
                           code="invalid_api_key")
    return bearer


def routers(served: Served, auth) -> tuple[APIRouter, APIRouter]:
    """The OpenAI routes (mounted at /v1 and at each session's /v1), and the session records."""
    v1 = APIRouter(dependencies=[auth])

    @v1.get("/models")
    async def models():
        return {"object": "list", "data": [{"id": served.model, "object": "model", "created": 0, "owned_by": "coevo",
                                             "max_model_len": served.context_length}]}

    @v1.post("/chat/completions")
    async def chat_route(request: Request):
        return await chat_completions(served, request, request.path_params.get("session"))

    @v1.post("/completions")
    async def completions_route(request: Request):
        return await completions(served, request, request.path_params.get("session"))

    sessions = APIRouter(prefix="/sessions/{session}", dependencies=[auth])

    @sessions.get("")
    async def read_session(session: str):
        return {"id": session, "trajectories": [t.model_dump() for t in found(served.sessions.get(session), session)]}

    @sessions.delete("")
    async def close_session(session: str):
        return {"id": session, "trajectories": [t.model_dump() for t in found(served.sessions.pop(session), session)]}

    return v1, sessions


def found(trajectories, session: str):
    if trajectories is None:
        raise APIError(404, f"No session `{session}`: a session exists once it has made a call.", param="session")
    return trajectories
