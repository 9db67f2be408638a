"""Sessions: a base URL per episode (`/sessions/{id}/v1`) whose calls are recorded token in, token out.

Each call's prompt ids (as the server tokenized them) and sampled ids with their logprobs go into a
coevo `Trajectory`, the same record the native agent loop writes, so that eval, the h-phase and GRPO
take them unchanged. A call whose prompt extends the segment so far (prompt + everything sampled and
added) adds only the new suffix, as environment tokens (mask 0). A client that re-renders the chat so
that the prompt does not extend it (a re-tokenized reply, an edited or trimmed history) starts a new
segment, as LEGO-RL and TRL do: sampled tokens are never re-tokenized. The segment it ends records in
`drift` how many tokens the new prompt departed from it by (0 for a segment that was never broken).
"""

from __future__ import annotations

import threading

from coevo import Completion
from coevo.rollout.tokens import token_drift
from coevo.rollout.trajectory import Step, Trajectory


class SessionStore:
    """Sessions by id, each a list of Trajectory segments. Thread-safe: the server records while an
    in-process caller (a native agent's runner) reads."""

    def __init__(self, harness: str = "served"):
        self.harness = harness
        self._segments: dict[str, list[Trajectory]] = {}
        self._lock = threading.Lock()

    def record(self, session: str, prompt_ids: list[int], completion: Completion, messages: list[dict]) -> None:
        """One call: `messages` is the chat it was rendered from (empty for a raw completions prompt)."""
        with self._lock:
            segments = self._segments.setdefault(session, [])
            segment = self._extend(segments[-1], prompt_ids) if segments else None
            if segment is None:
                segment = Trajectory(task=session, harness=self.harness, prompt_ids=list(prompt_ids), drift=0)
                segments.append(segment)
            segment.completion_ids += completion.token_ids
            segment.completion_mask += [1] * len(completion.token_ids)
            segment.logprobs += completion.logprobs
            segment.turns += 1
            segment.tokens += len(completion.token_ids)
            segment.steps.append(Step(reply=completion.text, tokens=len(completion.token_ids)))
            if messages:
                segment.messages = [*messages, {"role": "assistant", "content": completion.text}]

    @staticmethod
    def _extend(segment: Trajectory, prompt_ids: list[int]) -> Trajectory | None:
        """Add the prompt's new suffix to the segment, or measure the drift and return None."""
        buffer = segment.prompt_ids + segment.completion_ids
        if prompt_ids[: len(buffer)] != buffer:
            segment.drift = token_drift(buffer, prompt_ids)
            return None
        suffix = prompt_ids[len(buffer):]
        segment.completion_ids += suffix
        segment.completion_mask += [0] * len(suffix)
        segment.logprobs += [0.0] * len(suffix)
        return segment

    def get(self, session: str) -> list[Trajectory] | None:
        with self._lock:
            found = self._segments.get(session)
            return None if found is None else [t.model_copy(deep=True) for t in found]

    def pop(self, session: str) -> list[Trajectory] | None:
        with self._lock:
            return self._segments.pop(session, None)

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._segments)
