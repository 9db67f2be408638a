"""A refreshed curriculum: after each w-phase, the evolve tasks the incumbent solved in every sample
leave the evolve set (the w-phase harvested their successes first), and as many fresh instances of the
same families take their place. A solved task tells the harness search nothing more; a fresh one can.

Only the evolve set changes: promotion, test and held-out are frozen for the whole run. Each refresh is a
record in state.json (`curriculum`: generation, retired, added, folder), the draws are task folders under
`runs/<name>/splits/evolve-g<N>`, and a resumed run rebuilds the same evolve set from them. The fair arms
score on the original evolve set: the curriculum is part of co-evolution, not of a single lever.
"""

from __future__ import annotations

from coevo.search.context import RunContext
from coevo.search.scoring import batches
from coevo.search.splits import draw_fresh

EVOLVE_OFFSET = 5000
"""Added to the suite's seed (plus 100 x generation and the run's seed) for the refill draws; see
coevo/search/splits.py for the other draws' offsets."""


def current(ctx: RunContext) -> list:
    """The evolve tasks now: the original set, with every recorded refresh applied in order."""
    from coevo.tasks import load_taskset

    tasks = list(ctx.inputs.dev)
    for record in ctx.ledger.state.curriculum:
        retired = set(record["retired"])
        tasks = [t for t in tasks if t.name not in retired]
        if record.get("folder"):
            tasks += load_taskset(ctx.run_dir / record["folder"]).tasks
    return tasks


def restore(ctx: RunContext) -> None:
    """Point the evaluator's default batches at the current evolve set (a new or resumed run)."""
    tasks = current(ctx)
    ctx.evaluator.evolve_batches = batches(tasks, ctx.inputs.plan.batches, ctx.inputs.config.seed)


def solved(ctx: RunContext) -> list:
    """Evolve tasks the incumbent solved in every sample (its per-task objective is 1)."""
    per_task = ctx.incumbent.pair.per_task
    return [t for t in current(ctx) if per_task.get(t.name, 0.0) >= 1.0]


def refresh(ctx: RunContext, name: str, run_id: str, retiring: list) -> None:
    """Retire `retiring` and refill with fresh instances of their families (a resumable step)."""
    ctx.ledger.memo("refreshed", lambda: _refresh(ctx, name, run_id, retiring))
    restore(ctx)


def _refresh(ctx: RunContext, name: str, run_id: str, retiring: list) -> dict:
    from coevo.tasks.generate import generated_manifest

    ledger, config = ctx.ledger, ctx.inputs.config
    manifest = generated_manifest(config.tasks)
    record = {"generation": ledger.generation, "phase": name, "retired": sorted(t.name for t in retiring),
              "added": [], "folder": None}
    if retiring and manifest is not None:
        folder = f"splits/evolve-g{ledger.generation}-{name}"
        families = sorted({t.family for t in retiring})
        taken = {t.instruction for t in [*current(ctx), *ctx.inputs.promotion, *ctx.inputs.test,
                                         *ctx.inputs.held_out, *ctx.inputs.train]}
        seed = int(manifest["seed"]) + EVOLVE_OFFSET + 100 * ledger.generation + config.seed
        added = draw_fresh(config.tasks, ctx.run_dir / folder, len(retiring), seed, families, taken, "dev",
                           f"evolve{ledger.generation}")
        record.update(added=sorted(t.name for t in added), folder=folder)
    elif retiring:
        ctx.log(f"{name}: {config.tasks} was not written by `coevo tasks generate`: nothing to refill with, "
                "the evolve set keeps its solved tasks")
        record["retired"] = []
    ledger.state.curriculum.append(record)  # saved with the step's record, by memo
    ctx.tracker.metrics(run_id, {"curriculum/retired": len(record["retired"]),
                                 "curriculum/added": len(record["added"])}, step=ledger.generation)
    ctx.tracker.text(run_id, "\n".join(["retired:", *record["retired"], "added:", *record["added"]]) + "\n",
                     "curriculum.txt")
    ctx.log(f"{name}: curriculum: retired {len(record['retired'])} solved evolve task(s), added "
            f"{len(record['added'])} fresh instance(s) of their families")
    return {"retired": len(record["retired"]), "added": len(record["added"])}
