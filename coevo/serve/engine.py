"""Dynamic batching: concurrent requests are gathered for a few milliseconds (longer while the callers
just answered are expected back) and the compatible ones share one `Policy.generate` call, so that many
agents share one model.

Compatible means one sampling distribution: the same temperature and top_p (any top_p when greedy), and
the same grammar (vLLM's `structured_outputs`: coevo.harness.grammar), if any. A
request with a seed runs in a batch of its own (its n copies), because the policy mixes the seed with the
batch it draws for: alone, the same seed gives the same reply whatever else the server is doing. Rows
of one batch may ask for different max_tokens: the batch decodes to the longest and each row is cut
to its own limit, which changes nothing in the tokens before the cut. Stop strings are applied after
generation (and while streaming, by holding back a stop string's possible prefix).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from dataclasses import dataclass, field

from coevo import Completion, GenerationRequest, SamplingParams
from coevo.rollout.tokens import ChatTemplate


@dataclass
class Job:
    """One HTTP request: its prompt(s) in token ids, sampled n times each."""

    prompts: list[list[int]]
    params: SamplingParams
    n: int = 1
    stop: list[str] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    """For policies that read the chat (a scripted policy); the model reads only the ids."""
    stream: bool = False
    arrived: float = field(default_factory=time.monotonic)
    loop: asyncio.AbstractEventLoop | None = None
    events: asyncio.Queue | None = None
    """Where the engine thread posts ("delta", index, text, ids, logprobs) while decoding (when streaming)
    and ("done", completions) or ("error", exception) at the end."""

    @property
    def rows(self) -> int:
        return len(self.prompts) * self.n

    def post(self, *event) -> None:
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the server's event loop has closed (shutdown): nobody is waiting any more
            pass


def batch_key(job: Job) -> tuple:
    p = job.params
    if p.seed is not None:
        return ("alone", id(job))
    return (("greedy",) if p.temperature <= 0 else ("sampled", p.temperature, p.top_p)) + (p.grammar,)


class BatchingEngine:
    """One thread owns the model; `submit` may be called from any thread or event loop."""

    def __init__(self, policy, chat: ChatTemplate, stop_ids: list[int], window_s: float = 0.005,
                 max_rows: int = 64, streams: bool = False):
        """`streams`: the policy takes `on_step` (the local HF model), so streamed tokens arrive as they
        are decoded; otherwise a stream gets the whole reply at once."""
        self.policy, self.chat, self.stop_ids = policy, chat, set(stop_ids)
        self.window_s, self.max_rows, self.streams = window_s, max_rows, streams
        self.calls: list[int] = []
        """Rows per generate call, in order (the benchmark and the tests read it)."""
        self._answered, self._answered_at, self._patience_s = 0, 0.0, 0.0
        """Requests answered by the last round, when, and how long to wait for their callers to return."""
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="coevo-serve-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def submit(self, job: Job) -> None:
        self._queue.put(job)

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            jobs = self._gather(job)
            started = time.monotonic()
            for group in self._groups(jobs):
                try:
                    self._run(group)
                except Exception as e:  # noqa: BLE001 - boundary: these requests fail, the server goes on
                    for job in group:
                        job.post("error", e)
            self._answered, self._answered_at = len(jobs), time.monotonic()
            self._patience_s = min(0.5 * (self._answered_at - started), 0.25)

    def _gather(self, first: Job) -> list[Job]:
        """`first` and what arrives within the window of the last arrival, up to a full batch.

        Agents call again as soon as they are answered: while the callers the last round answered have
        not all come back, wait for them a little longer (half that round's time, at most 0.25 s), so that
        a batch that ran while they decoded and their next calls share one generate instead of taking
        turns. A lone client is back at once and waits for nothing.
        """
        jobs = [first]
        while sum(j.rows for j in jobs) < self.max_rows:
            back = sum(1 for j in jobs if j.arrived >= self._answered_at)
            timeout = self.window_s
            if back < self._answered:
                timeout = max(timeout, self._answered_at + self._patience_s - time.monotonic())
            try:
                more = self._queue.get(timeout=timeout)
            except queue.Empty:
                break
            if more is None:
                self._queue.put(None)
                break
            jobs.append(more)
        return jobs

    def _groups(self, jobs: list[Job]) -> list[list[Job]]:
        groups: dict[tuple, list[list[Job]]] = {}
        for job in jobs:
            batches = groups.setdefault(batch_key(job), [[]])
            if batches[-1] and sum(j.rows for j in batches[-1]) + job.rows > self.max_rows:
                batches.append([])
            batches[-1].append(job)
        return [batch for batches in groups.values() for batch in batches]

    def _run(self, jobs: list[Job]) -> None:
        rows = [(job, prompt) for job in jobs for prompt in job.prompts for _ in range(job.n)]
        requests = [GenerationRequest(token_ids=prompt, messages=job.messages) for job, prompt in rows]
        first = jobs[0].params
        params = SamplingParams(temperature=first.temperature, top_p=first.top_p, seed=first.seed,
                                max_tokens=max(job.params.max_tokens for job in jobs), grammar=first.grammar)
        streams, at = {}, 0
        for job in jobs:
            streams |= {at + i: RowStream(job, i, self) for i in range(job.rows) if job.stream}
            at += job.rows
        if self.streams and streams:
            out = self.policy.generate(requests, params, on_step=lambda tokens, logprobs: [
                stream.step(tokens[row], logprobs[row]) for row, stream in streams.items()])
        else:
            out = self.policy.generate(requests, params)
        self.calls.append(len(rows))
        at = 0
        for job in jobs:
            done = [self.cut(c, job.params.max_tokens, job.stop) for c in out[at: at + job.rows]]
            job.post("done", done)
            at += job.rows

    def cut(self, c: Completion, max_tokens: int, stop: list[str]) -> Completion:
        """The row as if decoded alone: cut to its own max_tokens, then at its first stop string."""
        if len(c.token_ids) > max_tokens:
            ids = c.token_ids[:max_tokens]
            c = Completion(self.chat.decode(ids), ids, c.logprobs[:max_tokens], finish_reason="length",
                           logprob_source=c.logprob_source, routing=c.routing and c.routing[:max_tokens])
        hits = [c.text.find(s) for s in stop if s in c.text]
        if not hits:
            return c
        # The fewest tokens whose text holds the stop string: those tokens were sampled, the text ends before it.
        end = next(k for k in range(1, len(c.token_ids) + 1) if any(s in self.chat.decode(c.token_ids[:k]) for s in stop))
        return Completion(c.text[: min(hits)], c.token_ids[:end], c.logprobs[:end], finish_reason="stop",
                          logprob_source=c.logprob_source, routing=c.routing and c.routing[:end])


class RowStream:
    """One streamed row: releases text as it is decoded, holding back what could still turn out to be the
    start of a stop string or half of a UTF-8 character. The "done" event carries the authoritative
    completion; what was released is always a prefix of it."""

    def __init__(self, job: Job, index: int, engine: BatchingEngine):
        self.job, self.index, self.engine = job, index, engine
        self.ids: list[int] = []
        self.sent = 0
        self.finished = False
        self.hold = max((len(s) for s in job.stop), default=1) - 1

    def step(self, token: int, logprob: float) -> None:
        if self.finished:
            return
        if token in self.engine.stop_ids or len(self.ids) >= self.job.params.max_tokens:
            self.finished = True
            return
        self.ids.append(token)
        text = self.engine.chat.decode(self.ids)
        if any(s in text for s in self.job.stop):
            self.finished = True  # the stop token's row is cut in "done"; nothing more is released
            self.ids.pop()
            return
        safe = len(text.rstrip("\ufffd")) - self.hold
        delta = text[self.sent: max(safe, self.sent)]
        self.sent += len(delta)
        self.job.post("delta", self.index, delta, [token], [logprob])
