"""Server-sent events in the OpenAI streaming shape: one chunk per decoded token (what the engine
released), then each choice's rest and finish_reason, an optional usage chunk, and `data: [DONE]`."""

from __future__ import annotations

import json

from coevo.serve.protocol import chat_logprobs, envelope, finish_reason, new_id, text_logprobs, usage


def sse(payload) -> str:
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"


async def events(job, rows: int):
    """("delta", index, text, ids, logprobs) as released, then ("rest", ...) per row and ("done", completions);
    an engine failure arrives as ("error", message)."""
    sent = [0] * rows
    sent_text = [0] * rows
    while True:
        event = await job.events.get()
        if event[0] == "delta":
            sent[event[1]] += len(event[3])
            sent_text[event[1]] += len(event[2])
            yield event
        elif event[0] == "error":
            yield ("error", f"generation failed: {event[1]}")
            return
        else:
            for i, c in enumerate(event[1]):
                yield ("rest", i, c.text[sent_text[i]:], c.token_ids[sent[i]:], c.logprobs[sent[i]:], finish_reason(c))
            yield event
            return


def error_chunk(message: str) -> str:
    return sse({"error": {"message": message, "type": "server_error", "param": None, "code": None}})


def chat_stream(served, job, body, prompt: list[int], session: str | None):
    from fastapi.responses import StreamingResponse

    id_ = new_id("chatcmpl")
    ids = body.return_token_ids

    def chunk(index, delta, token_ids=None, logprobs=None, finish=None, **extra):
        choice = {"index": index, "delta": delta, "finish_reason": finish,
                  "logprobs": chat_logprobs(served.tokens(token_ids), logprobs) if body.logprobs and token_ids else None,
                  **({"token_ids": token_ids or []} if ids else {})}
        return sse(envelope("chat.completion.chunk", id_, served.model, [choice], **extra))

    async def body_events():
        for i in range(job.rows):
            yield chunk(i, {"role": "assistant", "content": ""}, prompt_token_ids=prompt if ids else None)
        async for event in events(job, job.rows):
            if event[0] == "error":
                yield error_chunk(event[1])
            elif event[0] == "done":
                if session is not None:
                    served.sessions.record(session, prompt, event[1][0], job.messages)
                if body.stream_options and body.stream_options.include_usage:
                    yield sse(envelope("chat.completion.chunk", id_, served.model, [], usage=usage(len(prompt), event[1])))
            else:
                _, index, text, token_ids, logprobs, *finish = event
                yield chunk(index, {"content": text} if text or not finish else {}, token_ids, logprobs,
                            finish[0] if finish else None)
        yield sse("[DONE]")

    return StreamingResponse(body_events(), media_type="text/event-stream")


def completion_stream(served, job, body, prompts: list[list[int]], session: str | None):
    from fastapi.responses import StreamingResponse

    id_ = new_id("cmpl")

    def chunk(index, text, token_ids, logprobs, finish=None):
        choice = {"index": index, "text": text, "finish_reason": finish,
                  "logprobs": text_logprobs(served.tokens(token_ids), logprobs) if body.logprobs is not None else None}
        if body.return_token_ids:
            choice |= {"token_ids": token_ids, "prompt_token_ids": prompts[index // job.n]}
        return sse(envelope("text_completion", id_, served.model, [choice]))

    async def body_events():
        async for event in events(job, job.rows):
            if event[0] == "error":
                yield error_chunk(event[1])
            elif event[0] == "done":
                if session is not None:
                    served.sessions.record(session, prompts[0], event[1][0], [])
                if body.stream_options and body.stream_options.include_usage:
                    yield sse(envelope("text_completion", id_, served.model, [],
                                       usage=usage(sum(map(len, prompts)), event[1])))
            else:
                _, index, text, token_ids, logprobs, *finish = event
                yield chunk(index, text, token_ids, logprobs, finish[0] if finish else None)
        yield sse("[DONE]")

    return StreamingResponse(body_events(), media_type="text/event-stream")
