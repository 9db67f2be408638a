"""What a search config resolves to before any work: the base harness, the space, the plan, the phases of
the schedule, and the task subsets each role uses. Fixed for the whole run (a resumed run resolves the
same config to the same inputs: every subset is drawn with the config's seed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coevo.search.config import Plan, SearchConfig, make_plan
from coevo.search.errors import SearchError
from coevo.search.schedule import parse_schedule
from coevo.search.scoring import batches, stratified


@dataclass(frozen=True)
class Inputs:
    config: SearchConfig
    base: Any
    """The base harness, with the config's overrides applied."""
    space: Any
    """The SearchSpace: harness keys for h-phases, train.* keys for w-phases."""
    plan: Plan
    phases: list[str]
    """The schedule's phases by name: w0, h1, w1, h2, ..."""
    train: list
    """Train tasks (warm start and GRPO)."""
    dev: list
    """Dev tasks every trial and every acceptance is scored on."""
    dev_batches: list[list]
    """`dev` in batches that mix the families: the pruning points."""
    test: list
    """Test tasks of the final table."""

    def harness(self, overrides: dict[str, Any]):
        return self.base.with_overrides(overrides) if overrides else self.base


def load_inputs(config: SearchConfig) -> Inputs:
    from coevo.harness import load_harness
    from coevo.search.space_check import load_space
    from coevo.tasks import load_taskset

    phases = parse_schedule(config.schedule, "schedule")
    base = load_harness(config.harness)
    if config.overrides:
        base = base.with_overrides(config.overrides)
    space = load_space(config.space, base)
    taskset = load_taskset(config.tasks)
    splits = {s: taskset.split(s) for s in ("train", "dev", "test")}
    empty = [s for s, tasks in splits.items() if not tasks]
    if empty:
        raise SearchError(f"{config.tasks}: no tasks in split(s) {', '.join(empty)}; the search needs train, "
                          "dev and test (see manifest.json)")
    plan = make_plan(config, *(len(splits[s]) for s in ("train", "dev", "test")), len(space.train_params))
    dev = stratified(splits["dev"], plan.dev_tasks, config.seed)
    return Inputs(config=config, base=base, space=space, plan=plan, phases=phases,
                  train=stratified(splits["train"], plan.train_tasks, config.seed), dev=dev,
                  dev_batches=batches(dev, plan.batches, config.seed),
                  test=stratified(splits["test"], plan.test_tasks, config.seed))
