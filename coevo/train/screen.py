"""Screening before GRPO: train only on the task families that can teach the model something now.

A group whose episodes all score the same has zero advantage: it costs a whole rollout and teaches
nothing, and a family the model never (or always) solves yields only such groups. With the warm-started
tiny model about half the families are at 0%, so most of a step went to groups without signal. `screen`
rolls out every task `samples` times under the training harness and keeps the families whose episodes
disagree: pooled per family, because a few samples of one task say little (DAPO filters groups without
signal after the fact; this spends the rollouts once, up front). A task without a family is its own.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

SCREEN_FILE = "screen.json"


@dataclass
class Screen:
    kept: list[str]
    """Names of the tasks to train on (every task when the families with signal cannot fill a step)."""
    families: dict[str, float] = field(default_factory=dict)
    """Family -> its mean reward over the screening episodes."""
    signal: list[str] = field(default_factory=list)
    """Families whose episodes disagree (the kept ones)."""
    episodes: int = 0
    seconds: float = 0.0


def screen(tasks: list, harness, policy, samples: int, reward: str, seed: int, at_least: int = 1,
           sandboxes: tuple[str, dict | None] = ("local", None)) -> Screen:
    """Roll out `samples` episodes per task and keep the families with signal under `reward`; when they
    hold fewer than `at_least` tasks (a step's worth), keep every task."""
    import time

    from coevo.rollout import rollout
    from coevo.train.grpo_rollout import reward_of

    start = time.monotonic()
    backend, image_map = sandboxes
    trajectories = rollout(tasks, harness, policy, n_per_task=samples, seed=seed, backend=backend,
                           image_map=image_map)
    by_family: dict[str, list[float]] = defaultdict(list)
    family_of = {t.name: t.family or t.name for t in tasks}
    for t in trajectories:
        r = reward_of(t, reward)
        if r is not None:
            by_family[family_of[t.task]].append(r)
    means = {f: sum(rs) / len(rs) for f, rs in sorted(by_family.items())}
    signal = [f for f, rs in sorted(by_family.items()) if min(rs) < max(rs)]
    kept = [t.name for t in tasks if family_of[t.name] in signal]
    if len(kept) < at_least:
        kept = [t.name for t in tasks]
    return Screen(kept, means, signal, len(trajectories), time.monotonic() - start)


def save(screen_: Screen, run_dir: Path) -> None:
    (run_dir / SCREEN_FILE).write_text(json.dumps(screen_.__dict__, indent=1) + "\n")


def load(run_dir: Path) -> Screen | None:
    """The screen a run did before it was killed: a resumed run trains on the same tasks."""
    path = run_dir / SCREEN_FILE
    return Screen(**json.loads(path.read_text())) if path.exists() else None


def describe(s: Screen, n_tasks: int) -> str:
    if len(s.kept) == n_tasks and len(s.signal) < len(s.families):
        return (f"screen: {len(s.signal)} families showed signal in {s.episodes} episodes ({s.seconds:.0f}s), "
                f"too few tasks for a step; training on all {n_tasks} tasks")
    skipped = sorted(set(s.families) - set(s.signal))
    without = "; left out (mean reward): " + ", ".join(f"{f} {s.families[f]:.2f}" for f in skipped) if skipped else ""
    return (f"screen: {s.episodes} episodes in {s.seconds:.0f}s; training on {len(s.kept)} of {n_tasks} tasks, "
            f"{len(s.signal)} families with signal{without}")
