"""Capability statistics: pass@1 with a task-clustered bootstrap interval, and a paired bootstrap for
comparing two (harness, checkpoint) pairs on the same tasks."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


def per_task_means(pairs: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Mean value per task: samples of one task are not independent, so the task is the unit."""
    groups: dict[str, list[float]] = defaultdict(list)
    for task, value in pairs:
        groups[task].append(value)
    return {task: sum(v) / len(v) for task, v in groups.items()}


def bootstrap_ci(values: Sequence[float], n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
                 ) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (one value per task)."""
    if not values:
        return 0.0, 0.0
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(n_boot))
    return means[int(alpha / 2 * n_boot)], means[min(n_boot - 1, int((1 - alpha / 2) * n_boot))]


def paired_bootstrap(a: dict[str, float], b: dict[str, float], n_boot: int = 2000, seed: int = 0
                     ) -> tuple[float, float, float]:
    """(mean gain of b over a, CI low, CI high) resampling the tasks both were scored on."""
    tasks = sorted(set(a) & set(b))
    if not tasks:
        return 0.0, 0.0, 0.0
    diffs = [b[t] - a[t] for t in tasks]
    low, high = bootstrap_ci(diffs, n_boot=n_boot, seed=seed)
    return sum(diffs) / len(diffs), low, high


@dataclass(frozen=True)
class PairedGain:
    """b against a on the tasks both were scored on: the mean gain with its bootstrap interval, and how
    many tasks b won, lost and tied (a gain carried by a few tasks shows as few wins)."""

    gain: float
    low: float
    high: float
    wins: int
    losses: int
    ties: int

    def clears(self, margin: float = 0.0) -> bool:
        """The promotion rule: more wins than losses, and the interval's lower bound above `margin`."""
        return self.wins > self.losses and self.low > margin


def paired_gain(a: dict[str, float], b: dict[str, float], n_boot: int = 2000, seed: int = 0) -> PairedGain:
    tasks = sorted(set(a) & set(b))
    gain, low, high = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
    return PairedGain(gain, low, high, wins=sum(b[t] > a[t] for t in tasks),
                      losses=sum(b[t] < a[t] for t in tasks), ties=sum(b[t] == a[t] for t in tasks))


def two_by_two(h0m0: dict[str, float], h0m1: dict[str, float], h1m0: dict[str, float], h1m1: dict[str, float],
               n_boot: int = 2000, seed: int = 0) -> dict[str, tuple[float, float, float]]:
    """The harness effect ΔH = S(H*,M0) - S(H0,M0), the model effect ΔM = S(H0,M*) - S(H0,M0) and the
    interaction I = S(H*,M*) - S(H*,M0) - S(H0,M*) + S(H0,M0), each as (value, CI low, CI high) from one
    bootstrap over the tasks all four cells share. I > 0: the levers add more together than apart."""
    tasks = sorted(set(h0m0) & set(h0m1) & set(h1m0) & set(h1m1))
    contrasts = {
        "delta_h": [h1m0[t] - h0m0[t] for t in tasks],
        "delta_m": [h0m1[t] - h0m0[t] for t in tasks],
        "interaction": [h1m1[t] - h1m0[t] - h0m1[t] + h0m0[t] for t in tasks],
    }
    return {name: (sum(v) / max(1, len(v)), *bootstrap_ci(v, n_boot=n_boot, seed=seed))
            for name, v in contrasts.items()}
