"""`evaluate`: run a (harness, policy) pair on tasks through the rollout engine and summarise it.

Summaries are plain records (pass@1 with a 95% bootstrap interval, mean reward, turns, format-error
rate, timeouts, tokens), overall and per family, reproducible for a given seed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from coevo.evaluate.stats import bootstrap_ci, paired_bootstrap, per_task_means
from coevo.outcomes import credit, passed

__all__ = ["EvalReport", "Summary", "evaluate", "paired_bootstrap", "summarize"]


@dataclass
class Summary:
    episodes: int
    tasks: int
    pass_at_1: float
    """Share of episodes with reward 1 (mean over tasks of each task's success rate)."""
    ci_low: float
    ci_high: float
    mean_reward: float
    """Mean partial credit (the mean of the verifier's checks)."""
    mean_turns: float
    format_error_rate: float
    """Format errors per model turn."""
    timeouts: int
    """Commands that ran past their timeout, summed over episodes."""
    mean_tokens: float
    statuses: dict[str, int] = field(default_factory=dict)
    verify_errors: int = 0


@dataclass
class EvalReport:
    overall: Summary
    families: dict[str, Summary]
    per_task: dict[str, float]
    """pass@1 per task: what paired comparisons resample."""
    trajectories: list = field(default_factory=list, repr=False)

    def as_dict(self) -> dict:
        return {"overall": asdict(self.overall), "families": {k: asdict(v) for k, v in self.families.items()},
                "per_task": self.per_task}


def summarize(trajectories: Sequence, seed: int = 0) -> Summary:
    per_task = per_task_means([(t.task, float(passed(t))) for t in trajectories])
    low, high = bootstrap_ci(list(per_task.values()), seed=seed)
    n = max(1, len(trajectories))
    turns = sum(t.turns for t in trajectories)
    return Summary(
        episodes=len(trajectories), tasks=len(per_task),
        pass_at_1=sum(per_task.values()) / max(1, len(per_task)), ci_low=low, ci_high=high,
        mean_reward=sum(credit(t) for t in trajectories) / n,
        mean_turns=turns / n, format_error_rate=sum(t.format_errors for t in trajectories) / max(1, turns),
        timeouts=sum(t.timeouts for t in trajectories), mean_tokens=sum(t.tokens for t in trajectories) / n,
        statuses=dict(Counter(str(t.status) for t in trajectories)),
        verify_errors=sum(1 for t in trajectories if t.verify_error),
    )


def report(trajectories: Sequence, seed: int = 0) -> EvalReport:
    """Summaries count episodes: the segments of a served agent's episode are one (rollout.trajectory)."""
    from coevo.rollout.trajectory import episodes

    trajectories = episodes(trajectories)
    families = sorted({t.family for t in trajectories})
    return EvalReport(
        overall=summarize(trajectories, seed),
        families={f: summarize([t for t in trajectories if t.family == f], seed) for f in families},
        per_task=per_task_means([(t.task, float(passed(t))) for t in trajectories]),
        trajectories=list(trajectories),
    )


def evaluate(tasks: Sequence, harness, policy, samples: int = 1, seed: int = 0, out: Path | None = None,
             on_done: Callable | None = None) -> EvalReport:
    """Roll out `samples` episodes per task, save the trajectories to `out` (JSONL), and summarise."""
    from coevo.rollout import rollout, save_trajectories

    trajectories = rollout(tasks, harness, policy, n_per_task=samples, seed=seed, on_done=on_done)
    if out is not None:
        save_trajectories(out, trajectories)
    return report(trajectories, seed)
