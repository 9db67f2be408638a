"""Capability statistics: pass@1 with a task-clustered bootstrap interval, and a paired bootstrap for
comparing two (harness, checkpoint) pairs on the same tasks."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence


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
