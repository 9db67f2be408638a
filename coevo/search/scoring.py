"""Scoring a (harness, policy) pair on a split, in batches, with Optuna pruning between batches.

Every evaluation of the search goes through `score`, with the same batches and seeds, so two pairs are
compared on the same tasks under the same sampling seeds (what the paired bootstrap assumes).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial

from coevo.evaluate import EvalReport, report
from coevo.evaluate.stats import per_task_means
from coevo.outcomes import credit as partial_credit


def stratified(tasks: Sequence, n: int, seed: int) -> list:
    """`n` tasks spread over families as evenly as possible (deterministic for a seed); all if n >= len."""
    if n >= len(tasks):
        return list(tasks)
    rng = random.Random(seed)
    by_family: dict[str, list] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.name):
        by_family[t.family].append(t)
    for group in by_family.values():
        rng.shuffle(group)
    families = sorted(by_family)
    rng.shuffle(families)
    picked: list = []
    while len(picked) < n:
        for f in families:
            if by_family[f] and len(picked) < n:
                picked.append(by_family[f].pop())
    return sorted(picked, key=lambda t: t.name)


def batches(tasks: Sequence, n_batches: int, seed: int) -> list[list]:
    """Split tasks into batches that each mix the families (a partial pass rate is then a fair estimate)."""
    order = list(tasks)
    random.Random(seed).shuffle(order)
    order.sort(key=lambda t: t.family)  # stable: families in blocks, shuffled inside
    out: list[list] = [[] for _ in range(max(1, min(n_batches, len(order))))]
    for i, t in enumerate(order):  # deal round-robin: every batch gets a slice of every family
        out[i % len(out)].append(t)
    return out


def objective_of(result: EvalReport, objective: str) -> tuple[float, dict[str, float]]:
    """(value, per-task values) of an evaluation under the search's objective."""
    if objective == "pass_at_1":
        return result.overall.pass_at_1, result.per_task
    per_task = per_task_means([(t.task, partial_credit(t)) for t in result.trajectories])
    return sum(per_task.values()) / max(1, len(per_task)), per_task


class Pruned(Exception):
    """The trial was stopped after a batch; `partial` holds what was scored."""

    def __init__(self, step: int, value: float, partial: EvalReport, where: str = ""):
        super().__init__(f"pruned {where or f'after batch {step + 1}'} at objective {value:.3f}")
        self.step, self.value, self.partial = step, value, partial


def score(task_batches: list[list], harness, policy, samples: int, seed: int, sandbox: str = "local",
          trial=None, on_batch: Callable[[int, float, int], None] | None = None,
          objective: str = "pass_at_1", first_step: int = 0) -> EvalReport:
    """Roll out every batch; with an Optuna `trial`, report the running objective after each batch (as
    step first_step + batch index: a nested trial has reported its inner steps before) and raise `Pruned`
    when the pruner says so. Episodes per batch use seed + batch index."""
    from coevo.rollout import rollout
    from coevo.sandbox import make_sandbox

    trajectories: list = []
    for i, batch in enumerate(task_batches):
        trajectories += rollout(batch, harness, policy, n_per_task=samples, seed=seed + i,
                                make_sandbox=partial(make_sandbox, backend=sandbox))
        partial_report = report(trajectories, seed)
        value, _ = objective_of(partial_report, objective)
        if on_batch is not None:
            on_batch(i, value, len(trajectories))
        if trial is not None and i < len(task_batches) - 1:
            trial.report(value, first_step + i)
            if trial.should_prune():
                raise Pruned(i, value, partial_report)
    return report(trajectories, seed)
