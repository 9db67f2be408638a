"""What a search config resolves to before any work: the base harness, the space, the plan, the phases of
the schedule, and the tasks of each role. Fixed for the whole run (a resumed run resolves the same config
to the same inputs: every subset is drawn with the config's seed, and drawn task folders are read back
from the run folder).

The roles (coevo/search/splits.py), each used for one thing only: the evolve set (dev) scores trials and
is all Optuna sees; the promotion set accepts or rejects candidates; the test set and the held-out block
make the final table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coevo.search.config import Plan, SearchConfig, make_plan
from coevo.search.errors import SearchError
from coevo.search.schedule import Phase, parse_phases
from coevo.search.scoring import batches, stratified
from coevo.search.splits import check_disjoint, resolve_splits

GREEDY = {"decoding.temperature": 0.0}
"""What greedy scoring lays over a pair's harness (training keeps the harness's own decoding)."""


@dataclass(frozen=True)
class Inputs:
    config: SearchConfig
    base: Any
    """The base harness, with the config's overrides applied."""
    space: Any
    """The SearchSpace: harness keys for h-phases, train.* keys for w-phases."""
    plan: Plan
    schedule: list[Phase]
    """The schedule's phases, typed: (w0, "w0"), (h, "h1"), (w, "w1"), ..."""
    train: list
    """Train tasks (warm start and GRPO)."""
    dev: list
    """Dev tasks every trial and every acceptance is scored on."""
    dev_batches: list[list]
    """`dev` in batches that mix the families: the pruning points."""
    test: list
    """In-distribution test tasks of the final table."""
    promotion: list = field(default_factory=list)
    """Tasks that accept or reject a candidate; disjoint from dev and test, and never used to choose."""
    held_out: list = field(default_factory=list)
    """Test tasks of families never trained on: their own block of the final table."""
    origin: dict[str, str] = field(default_factory=dict)
    """Where each role's tasks come from, in words."""

    @property
    def phases(self) -> list[str]:
        """The schedule's phases by name: w0, h1, w1, h2, ..."""
        return [p.name for p in self.schedule]

    def harness(self, overrides: dict[str, Any]):
        """The harness a pair trains under."""
        return self.base.with_overrides(overrides) if overrides else self.base

    def scoring_harness(self, overrides: dict[str, Any]):
        """The harness a pair is scored (and exported) under: greedy decoding unless the config opts out."""
        return self.base.with_overrides({**overrides, **(GREEDY if self.config.greedy else {})})

    def sizes(self) -> dict[str, int]:
        return {"evolve": len(self.dev), "promotion": len(self.promotion), "test": len(self.test),
                "held_out": len(self.held_out), "train": len(self.train)}


def load_inputs(config: SearchConfig) -> Inputs:
    from coevo.errors import CoevoError
    from coevo.harness import load_harness
    from coevo.search.instructions.lineage import with_run_prompts
    from coevo.search.space_check import load_space
    from coevo.tasks import load_taskset

    schedule = parse_phases(config.schedule, f"{config.source}: schedule")
    check_train_and_policy(config)
    base = load_harness(config.harness)
    if config.overrides:
        try:
            base = base.with_overrides(config.overrides)
        except CoevoError as e:
            raise SearchError(f"{config.source}: overrides: {e}") from None
    space = load_space(config.space, base)
    check_greedy(config, space)
    base = with_run_prompts(base, space, config.run_dir)  # where GEPA's evolved templates resolve
    try:
        taskset = load_taskset(config.tasks)
    except CoevoError as e:
        raise SearchError(f"{config.source}: tasks {config.tasks}: {e}") from None
    splits = {s: taskset.split(s) for s in ("train", "dev", "test")}
    empty = [s for s, tasks in splits.items() if not tasks]
    if empty:
        raise SearchError(f"{config.tasks}: no tasks in split(s) {', '.join(empty)}; the search needs train, "
                          "dev and test (see manifest.json)")
    plan = make_plan(config, *(len(splits[s]) for s in ("train", "dev", "test")), len(space.train_params))
    roles = resolve_splits(config.tasks, config.run_dir, stratified(splits["dev"], plan.dev_tasks, config.seed),
                           config.splits.test, config.splits.promotion, config.seed, config.splits.test_seed)
    check_disjoint(roles, f"search config '{config.name}' ({config.tasks})")
    return Inputs(config=config, base=base, space=space, plan=plan, schedule=schedule,
                  train=stratified(splits["train"], plan.train_tasks, config.seed), dev=roles.evolve,
                  dev_batches=batches(roles.evolve, plan.batches, config.seed),
                  test=stratified(roles.test, plan.test_tasks, config.seed), promotion=roles.promotion,
                  held_out=held_out(roles.held_out, config.splits.held_out, config.splits.test_seed),
                  origin=roles.origin)


def held_out(tasks: list, n: int | None, seed: int) -> list:
    """The held-out block of the final table: all of it, or a family-stratified subset of `n` (0: none)."""
    return tasks if n is None else stratified(tasks, n, seed) if n else []


def check_train_and_policy(config: SearchConfig) -> None:
    """`train:` and `policy:` are read only when a w-phase or an evaluation starts: checked now, so that a typo
    is an error naming the config file before any work, not a crash after it."""
    from coevo.policy import BACKENDS
    from coevo.train.spec import spec_from_dict

    spec_from_dict({**config.train, "report_to": "none"}, f"{config.source}: train")
    backend = (config.policy or {}).get("backend", "hf")
    if backend not in BACKENDS:
        raise SearchError(f"{config.source}: field 'policy.backend': {backend!r} is not a policy backend (valid: "
                          f"{', '.join(BACKENDS)})")
    if backend == "vllm" and not config.policy.get("base_url"):
        from coevo.vllm.install import VLLMNotFound, vllm_python

        try:
            vllm_python(config.policy.get("python"))
        except VLLMNotFound as e:
            raise SearchError(f"{config.source}: field 'policy.backend': vllm: {e}") from None


def check_greedy(config: SearchConfig, space) -> None:
    """Under greedy scoring a decoding dimension would change nothing that is scored: an error, not a
    search that silently wastes its trials."""
    keys = [p.path for p in space.params if p.path.startswith("decoding.")]
    if config.greedy and keys:
        raise SearchError(f"{config.space}: {', '.join(keys)}: scoring is greedy (the search config's `greedy: "
                          "true`), so decoding is not a harness dimension; remove the key(s), or set "
                          "`greedy: false` in the search config")
