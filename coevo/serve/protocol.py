"""Request and response bodies in the OpenAI API's shape, with vLLM's extra token-id fields.

Requests are validated with pydantic (a bad field is a 400 naming it); unknown fields are ignored, as
OpenAI clients send many (`user`, `stream_options`, ...). Token ids follow vLLM: `return_token_ids`
in the request adds `prompt_token_ids` (per response, or per choice for completions) and `token_ids`
(per choice, and per streamed chunk). Logprobs are the sampled tokens' only: no alternatives.
"""

from __future__ import annotations

import time
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from coevo import Completion, SamplingParams


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    """Text, or a list of text parts (joined); images and audio are refused."""

    def for_template(self) -> dict:
        content = self.content
        if isinstance(content, list):
            content = "".join(part.text for part in content)
        return {**self.model_dump(exclude_none=True), "content": content or ""}


class StreamOptions(BaseModel):
    include_usage: bool = False


class StructuredOutputs(BaseModel):
    """vLLM's `structured_outputs`; of its kinds only `grammar` (xgrammar EBNF, root rule `root`)."""

    model_config = ConfigDict(extra="forbid")
    grammar: str

    @field_validator("grammar")
    @classmethod
    def _compiles(cls, grammar: str) -> str:
        check_ebnf(grammar)
        return grammar


class Sampling(BaseModel):
    """What chat and completions requests share."""

    model_config = ConfigDict(extra="ignore")
    model: str
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1, le=16)
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    return_token_ids: bool = False
    """vLLM's field: the response carries the prompt's and each choice's token ids."""
    structured_outputs: StructuredOutputs | None = None
    """vLLM's field: every choice is a sentence of this grammar (its logprobs are then of the masked
    distribution, and each choice says `"logprob_source": "constrained"`)."""
    guided_grammar: str | None = None
    """vLLM's older name for structured_outputs.grammar."""

    @field_validator("guided_grammar")
    @classmethod
    def _compiles(cls, grammar: str | None) -> str | None:
        if grammar is not None:
            check_ebnf(grammar)
        return grammar

    @property
    def grammar(self) -> str | None:
        return self.structured_outputs.grammar if self.structured_outputs else self.guided_grammar

    def stops(self) -> list[str]:
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return [s for s in stops if s]

    def sampling(self, max_tokens: int) -> SamplingParams:
        return SamplingParams(temperature=1.0 if self.temperature is None else self.temperature,
                              top_p=1.0 if self.top_p is None else self.top_p, max_tokens=max_tokens, seed=self.seed,
                              grammar=self.grammar)


class ChatRequest(Sampling):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    """The newer name of max_tokens; either may be given."""
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=0)
    """Only 0: the server returns the sampled token's logprob, not alternatives."""
    tools: list[dict] | None = None


class CompletionRequest(Sampling):
    prompt: str | list[int] | list[str] | list[list[int]]
    """Text or token ids, one prompt or a list of them."""
    logprobs: int | None = Field(None, ge=0, le=1)
    """0 or 1: the sampled token's logprob (there are no alternatives to list)."""
    echo: Literal[False] = False


def check_ebnf(grammar: str) -> None:
    """A ValueError (a 400 naming the field) unless `grammar` is an EBNF grammar xgrammar can parse."""
    import xgrammar as xgr

    try:
        xgr.Grammar.from_ebnf(grammar)
    except RuntimeError as e:
        raise ValueError(f"not an EBNF grammar with a `root` rule: {str(e).splitlines()[0]}") from None


def source(c: Completion) -> dict:
    """A choice's `logprob_source`, said only when it is not the model's own distribution."""
    return {"logprob_source": c.logprob_source} if c.logprob_source != "model" else {}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage(prompt_tokens: int, completions: list[Completion]) -> dict:
    done = sum(len(c.token_ids) for c in completions)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": done, "total_tokens": prompt_tokens + done}


def finish_reason(c: Completion) -> str:
    return c.finish_reason if c.finish_reason in ("stop", "length") else "stop"


def chat_logprobs(tokens: list[str], logprobs: list[float]) -> dict:
    return {"content": [{"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
                        for t, lp in zip(tokens, logprobs)]}


def text_logprobs(tokens: list[str], logprobs: list[float], offset: int = 0) -> dict:
    offsets, at = [], offset
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": [{t: lp} for t, lp in zip(tokens, logprobs)],
            "text_offset": offsets}


def envelope(kind: str, id_: str, model: str, choices: list[dict], **extra) -> dict:
    return {"id": id_, "object": kind, "created": int(time.time()), "model": model, "choices": choices,
            **{k: v for k, v in extra.items() if v is not None}}
