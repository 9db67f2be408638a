"""The held-out table that ends every search: four pairs scored on the test split, each with its 95%
interval, and each one's paired gain over the baseline (in the search's objective).

    baseline       base harness x generation-0 checkpoint (the warm start, or the given model)
    harness-only   the harness accepted for the generation-0 checkpoint x that checkpoint
    weights-only   base harness x the last trained checkpoint
    co-evolved     the incumbent pair (accepted harness x accepted checkpoint)

Under the table, the verdict the search exists for: co-evolved's paired gain over each single-lever row, and
whether both intervals clear zero.
"""

from __future__ import annotations

from typing import Any

from coevo.outcomes import SUMMARY_METRICS
from coevo.search import plots
from coevo.search.context import RunContext
from coevo.search.state import RunState

ROWS = ("baseline", "harness-only", "weights-only", "co-evolved")
SINGLE_LEVERS = ("harness-only", "weights-only")


def row_pairs(state: RunState) -> dict[str, tuple[dict, str, int, str]]:
    """Row -> (harness overrides, checkpoint, generation, where the harness comes from)."""
    ckpts = state.checkpoints
    h_only = state.harness_only or state.baseline
    inc = state.incumbent
    return {"baseline": ({}, ckpts[0], 0, "base harness"),
            "harness-only": (h_only.overrides, ckpts[0], 0, h_only.source.split(" on g")[0]),
            "weights-only": ({}, ckpts[-1], len(ckpts) - 1, "base harness"),
            "co-evolved": (inc.overrides, inc.checkpoint, inc.generation, inc.source.split(" on g")[0])}


def test_table(ctx: RunContext, run_id: str) -> dict[str, dict[str, Any]]:
    """Score each row on the test split (a resumed run skips the rows it has), then the gains and the
    verdict, logged to MLflow under the parent run and printed."""
    state = ctx.ledger.state
    for row, (overrides, ckpt, gen, origin) in row_pairs(state).items():
        if row in state.test:
            continue
        key = repr((sorted(overrides.items()), ckpt))  # identical pairs are scored once
        same = next((r for r, v in state.test.items() if v["key"] == key), None)
        if same is None:
            pair, report = ctx.evaluator.evaluate(f"test {row}", run_id, overrides, ckpt, gen, origin,
                                                  task_batches=[ctx.inputs.test], tags={"row": row})
            record = {**pair.model_dump(), "key": key, **{k: getattr(report.overall, k) for k in SUMMARY_METRICS}}
        else:
            record = {**state.test[same], "same_as": same}
        state.test[row] = record
        ctx.ledger.save()
    _gains(ctx, state)
    text = markdown(state.test, len(ctx.inputs.test), ctx.inputs.config.objective)
    ctx.tracker.text(state.parent_run, text, "test_table.md")
    ctx.tracker.text(state.parent_run, _json(state.test), "test_table.json")
    plots.log_capability(ctx.tracker, state.parent_run, state.history, state.test)
    ctx.ledger.save()
    ctx.log(text)
    return state.test


def _gains(ctx: RunContext, state: RunState) -> None:
    """Each row's paired gain over the baseline, and co-evolved's over each single lever (the verdict)."""
    from coevo.evaluate import paired_bootstrap

    seed = ctx.inputs.config.seed
    base = state.test["baseline"]["per_task"]
    for row, record in state.test.items():
        record["gain"], record["gain_low"], record["gain_high"] = paired_bootstrap(base, record["per_task"], seed=seed)
        ctx.tracker.metrics(state.parent_run, {f"test/{row}/{k}": record[k] for k in (
            "pass_at_1", "ci_low", "ci_high", "mean_reward", "gain", "gain_low", "gain_high")})
    co = state.test["co-evolved"]
    co["vs"] = {row: paired_bootstrap(state.test[row]["per_task"], co["per_task"], seed=seed)
                for row in SINGLE_LEVERS}
    co["beats_single_levers"] = all(low > 0 for _, low, _ in co["vs"].values())
    ctx.tracker.metrics(state.parent_run, {
        "test/co-evolved/beats_single_levers": float(co["beats_single_levers"]),
        **{f"test/co-evolved/vs_{row}/{k}": v for row, gain in co["vs"].items()
           for k, v in zip(("gain", "gain_low", "gain_high"), gain, strict=True)}})


def markdown(test: dict[str, dict], n_tasks: int, objective: str = "pass_at_1") -> str:
    name = "pass@1" if objective == "pass_at_1" else "reward"
    title = (f"Held-out test split ({n_tasks} tasks): pass@1 with its 95% bootstrap interval; gain over the "
             f"baseline in the search objective ({name}) with its paired-bootstrap interval.")
    lines = [title, "",
             f"| pair | harness | checkpoint | pass@1 [95% CI] | {name} gain vs baseline [95% CI] | reward | turns |",
             "|---|---|---|---|---|---|---|"]
    for row in ROWS:
        r = test.get(row)
        if r is None:
            continue
        harness = "base" if not r["overrides"] else f"{r['source']} ({len(r['overrides'])} fields searched)"
        gain = "—" if row == "baseline" else f"{r['gain']:+.3f} [{r['gain_low']:+.3f}, {r['gain_high']:+.3f}]"
        lines.append(f"| {row} | {harness} | g{r['generation']} | {r['pass_at_1']:.3f} [{r['ci_low']:.3f}, "
                     f"{r['ci_high']:.3f}] | {gain} | {r['mean_reward']:.3f} | {r['mean_turns']:.1f} |")
    co = test.get("co-evolved", {})
    if "vs" in co:
        lines += ["", verdict(co, name)]
    return "\n".join(lines) + "\n"


def verdict(co: dict, name: str) -> str:
    """One sentence: co-evolved against each single lever (paired, same tasks and seeds), and why not."""
    versus = "; ".join(f"vs {row} {g:+.3f} [{lo:+.3f}, {hi:+.3f}]" for row, (g, lo, hi) in co["vs"].items())
    if co["beats_single_levers"]:
        return f"Co-evolved beats both single levers beyond the paired 95% interval ({name}: {versus})."
    why = (f": it is the {co['same_as']} pair, as no later pair cleared the acceptance test on dev"
           if co.get("same_as") else "")
    return f"Co-evolved does not beat both single levers beyond the paired 95% interval{why} ({name}: {versus})."


def _json(test: dict) -> str:
    import json

    return json.dumps({row: {k: v for k, v in r.items() if k != "key"} for row, r in test.items()}, indent=1)
