"""Fresh instances for GRPO: train on new instances of the tasks' families, so no task comes back.

With the bundled suite's 9 train instances per family, a 30-step run of 16 tasks per step meets each
task about 3 times, and the tiny model learns those instances rather than the skill: in our runs pass@1
rose from 0.33 to 0.53 on its own train tasks and did not move on new instances of the same families.
Drawing one instance per task slot of the run from the suite's generator (a seed of its own, held-out
families and dev/test instructions excluded, see `coevo.train.warmstart.extra_tasks`) leaves only what
transfers to be learnt.
"""

from __future__ import annotations

import math
from pathlib import Path

DRAW_OFFSET = 1000
"""Added to the run's seed for `extra_tasks`, which the warm start calls with its SFT seed (0 by default):
GRPO's instances are other ones than those the model was warm-started on."""


def fresh_instances(tasks: list, slots: int, out: Path, seed: int = 0) -> list:
    """At least `slots` new instances of `tasks`' families, spread evenly over them, written under `out`.

    Deterministic in `seed`, so a resumed run draws the same ones. The tasks must come from one suite that
    `coevo tasks generate` wrote (its manifest.json names the generator and its seed)."""
    from coevo.tasks.generate import generated_manifest
    from coevo.train.warmstart import extra_tasks

    suites = {t.path.parent for t in tasks}
    suite = next(iter(suites)) if len(suites) == 1 else None
    if suite is None or generated_manifest(suite) is None:
        found = ", ".join(sorted(str(s) for s in suites)[:3])
        raise ValueError(f"fresh_instances: the train tasks must come from one suite written by `coevo tasks "
                         f"generate` (found: {found}); set fresh_instances: false for other task folders")
    families = sorted({t.family for t in tasks})
    per_family = math.ceil(slots / len(families))
    drawn = extra_tasks(suite, Path(out), per_family, seed=DRAW_OFFSET + seed)
    kept = [t for t in drawn if t.family in families]
    if not kept:
        raise ValueError(f"fresh_instances: {suite}'s generator has none of the families {families} outside "
                         "its held-out ones")
    return kept
