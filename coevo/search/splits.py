"""The three roles a task can play in a search, each used for one thing only.

- evolve: trials are scored on it, and Optuna sees only these scores;
- promotion: frozen and disjoint from the evolve set; it accepts or rejects a candidate (the ratchet)
  and never chooses among trials, so a trial picked for a lucky evolve score is not also accepted on
  that luck;
- test: for the final table only. On a suite that `coevo tasks generate` wrote, it is a large draw of
  fresh instances of the trained families (in distribution), with a seed of its own; the suite's
  held-out families form a block of their own, reported apart.

Drawn sets are written once into the run folder and read back on resume, so they never change under a
running search. On a task folder the generator did not write, promotion is a fixed half of the dev split
and test is the folder's test split.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from coevo.search.errors import SearchError

PROMOTION_OFFSET, TEST_OFFSET = 7000, 9000
"""Added to the suite's seed for the promotion and test draws. The warm start draws at +1000 and GRPO's
fresh instances at +2000 (plus the run's seed), so none of these draws share a generator seed."""


@dataclass
class Splits:
    evolve: list
    promotion: list
    test: list
    held_out: list = field(default_factory=list)
    """Test tasks of families never trained on: a block of the final table of its own."""
    origin: dict[str, str] = field(default_factory=dict)
    """Where each role's tasks come from, in words (config, run folder and MLflow record it)."""

    def sizes(self) -> dict[str, int]:
        return {role: len(getattr(self, role)) for role in ("evolve", "promotion", "test", "held_out")}

    def record(self) -> dict:
        """What `splits.json` in the run folder and the MLflow params hold."""
        return {"sizes": self.sizes(), "origin": self.origin,
                "tasks": {role: sorted(t.name for t in getattr(self, role))
                          for role in ("evolve", "promotion", "test", "held_out")}}


def check_disjoint(splits: Splits, config: Path | str) -> None:
    """Overlapping roles are an error naming the config and the tasks (same folder or same instruction)."""
    roles = ("evolve", "promotion", "test", "held_out")
    for i, a in enumerate(roles):
        for b in roles[i + 1:]:
            left, right = getattr(splits, a), getattr(splits, b)
            # By folder and by instruction: drawn suites reuse the generator's folder names.
            same = {t.instruction for t in left} & {t.instruction for t in right}
            shared = sorted({str(t.path) for t in left} & {str(t.path) for t in right}
                            | {str(t.path) for t in right if t.instruction in same})
            if shared:
                raise SearchError(f"{config}: the {a} and {b} tasks overlap in {len(shared)} task(s): "
                                  f"{', '.join(shared[:5])}; each role must have tasks of its own")


def draw_fresh(suite: Path, out: Path, n: int, seed: int, families: list[str], exclude: set[str],
               split: str, prefix: str) -> list:
    """`n` new instances of `families`, spread evenly, none with an instruction in `exclude`, written under
    `out` once as a task folder of their own, named `prefix`-<instance>, whose manifest puts them all in
    `split` (so `coevo eval --tasks OUT --split SPLIT` scores exactly them). An existing draw is read back: a resumed run scores
    the same tasks."""
    from coevo.tasks import load_taskset

    out = Path(out)
    if not (out / "manifest.json").is_file():
        _write_draw(out, n, seed, families, exclude, split, prefix)
    return load_taskset(out).split(split)


def _write_draw(out: Path, n: int, seed: int, families: list[str], exclude: set[str], split: str,
                prefix: str) -> None:
    import shutil

    from coevo.tasks import load_taskset
    from coevo.tasks.generate import MANIFEST, generate_suite

    staging = out.with_name(out.name + ".staging")  # a killed draw leaves no half folder behind
    shutil.rmtree(staging, ignore_errors=True)
    generate_suite(staging, seed=seed, per_family=math.ceil(n / len(families)) + 2)  # +2: room for `exclude`
    by_family: dict[str, list] = {f: [] for f in families}
    for task in load_taskset(staging).tasks:
        if task.family in by_family and task.instruction not in exclude:
            by_family[task.family].append(task)
    # Round-robin over the families: exactly n, as even as the exclusions allow.
    deepest = max((len(v) for v in by_family.values()), default=0)
    kept = [by_family[f][i] for i in range(deepest) for f in families if i < len(by_family[f])][:n]
    manifest = json.loads((staging / MANIFEST).read_text())
    # Named after the role, so that per-task scores of different roles never share a task name.
    manifest["tasks"] = [{"name": f"{prefix}-{t.name}", "family": t.family, "split": split}
                         for t in sorted(kept, key=lambda t: t.name)]
    for task in load_taskset(staging).tasks:
        if task in kept:
            task.path.rename(staging / f"{prefix}-{task.name}")
        else:
            shutil.rmtree(task.path)
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    staging.rename(out)


def resolve_splits(suite: Path, run_dir: Path, evolve: list, test_size: int, promotion_size: int,
                   seed: int = 0, test_seed: int = 0) -> Splits:
    """The three roles for a search over `suite` whose evolve set is `evolve` (the dev tasks it scores)."""
    from coevo.tasks import load_taskset
    from coevo.tasks.generate import generated_manifest

    everything = load_taskset(suite)
    manifest = generated_manifest(suite)
    if manifest is None:
        return _fixed_folder(everything, evolve, seed)
    held = set(manifest.get("held_out_families", []))
    families = sorted({t.family for t in everything.tasks if t.family not in held})
    seen = {t.instruction for t in everything.tasks}
    base = int(manifest["seed"])
    promotion = draw_fresh(suite, run_dir / "splits" / "promotion", promotion_size, base + PROMOTION_OFFSET + seed,
                           families, seen, "dev", "promotion")
    test = draw_fresh(suite, run_dir / "splits" / "test", test_size, base + TEST_OFFSET + test_seed, families,
                      seen | {t.instruction for t in promotion}, "test", "test")
    held_out = [t for t in everything.split("test") if t.family in held]
    return Splits(evolve, promotion, test, held_out, origin={
        "evolve": f"{suite}: dev split ({len(evolve)} tasks)",
        "promotion": f"fresh instances of {len(families)} trained families, generator seed "
                     f"{base + PROMOTION_OFFSET + seed}",
        "test": f"fresh instances of {len(families)} trained families, generator seed {base + TEST_OFFSET + test_seed}",
        "held_out": f"{suite}: test split, held-out families {', '.join(sorted(held))}",
    })


def _fixed_folder(everything, evolve: list, seed: int) -> Splits:
    """A folder the generator did not write: promotion is a seeded half of the dev tasks not in the evolve
    set (or of the evolve set itself, split in two, when it takes all of dev); test is the test split."""
    dev = everything.split("dev")
    rest = [t for t in dev if t not in evolve]
    if not rest:
        shuffled = sorted(evolve, key=lambda t: t.name)
        random.Random(f"{seed}:promotion").shuffle(shuffled)
        half = len(shuffled) // 2
        evolve, rest = sorted(shuffled[half:], key=lambda t: t.name), shuffled[:half]
    return Splits(evolve, sorted(rest, key=lambda t: t.name), everything.split("test"), origin={
        "evolve": "dev split", "promotion": "dev split, disjoint from the evolve set", "test": "test split"})


def save_splits(splits: Splits, run_dir: Path) -> Path:
    path = Path(run_dir) / "splits.json"
    path.write_text(json.dumps(splits.record(), indent=1) + "\n")
    return path
