"""Any OpenAI-compatible chat endpoint (vLLM, llama.cpp, a hosted API) as a Policy.

It reads each request's `messages`, so it returns text: `token_ids` stay empty, and `logprobs` are
the endpoint's per-token logprobs only when asked for (`logprobs=True`) and returned. Good for
evaluation and harness search, not for GRPO. The API key is read from an environment variable
whose NAME is configured; the key itself is never stored in a repr, a log line or an error.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from coevo import Completion, GenerationRequest, SamplingParams


class OpenAIPolicy:
    def __init__(self, model: str, base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY",
                 logprobs: bool = False, concurrency: int = 8, timeout_s: float = 120.0,
                 max_retries: int = 2):
        """`api_key_env=None` is for servers without auth (a placeholder key is sent)."""
        from openai import OpenAI

        api_key = "EMPTY"
        if api_key_env is not None:
            api_key = os.environ.get(api_key_env, "")
            if not api_key:
                raise ValueError(f"openai policy: environment variable {api_key_env} is unset or empty; "
                                 "set it, or pass api_key_env=None for a server without auth")
        self.model, self.base_url, self.api_key_env = model, base_url, api_key_env
        self.logprobs, self.concurrency = logprobs, concurrency
        self._client = OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries)

    def __repr__(self) -> str:
        return f"OpenAIPolicy(model={self.model!r}, base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    def generate(self, requests: list[GenerationRequest], params: SamplingParams) -> list[Completion]:
        for r in requests:
            if not r.messages:
                raise ValueError("OpenAIPolicy needs messages in every GenerationRequest (got none)")
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(requests)))) as pool:
            return list(pool.map(lambda r: self._one(r, params), requests))

    def _one(self, request: GenerationRequest, params: SamplingParams) -> Completion:
        extra = {"seed": params.seed} if params.seed is not None else {}
        response = self._client.chat.completions.create(
            model=self.model, messages=request.messages, temperature=params.temperature,
            top_p=params.top_p, max_tokens=params.max_tokens, logprobs=self.logprobs or None, **extra,
        )
        choice = response.choices[0]
        content = choice.logprobs.content if choice.logprobs is not None else None
        logprobs = [t.logprob for t in content] if content else []
        reason = "length" if choice.finish_reason == "length" else "stop"
        return Completion(choice.message.content or "", [], logprobs, finish_reason=reason)
