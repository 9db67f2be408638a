"""Where a step's rollout wall time went: generate calls, verifier runs, and the rest (sandboxes: start,
tool calls, close). Verifications run in a thread pool while other episodes generate, so the split is
computed from the union of each kind's intervals rather than from sums."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager


class Timeline:
    def __init__(self):
        self.spans: dict[str, list[tuple[float, float]]] = {"generate": [], "verify": []}
        self._lock = threading.Lock()

    @contextmanager
    def span(self, kind: str):
        start = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self.spans[kind].append((start, time.monotonic()))

    def breakdown(self, total: float) -> dict[str, float]:
        """Seconds of `total` (the rollout's wall time): generating, verifying while not generating, rest."""
        gen = _union(self.spans["generate"])
        verify = _length(_union(self.spans["verify"])) - _overlap(_union(self.spans["verify"]), gen)
        generate = _length(gen)
        return {"time/rollout": total, "time/generate": generate, "time/verify": verify,
                "time/sandbox": max(0.0, total - generate - verify)}


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in spans)


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)
