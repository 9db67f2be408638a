"""The table that ends every search, scored on the test tasks only (never seen by a trial or a promotion).

    baseline       base harness x generation 0 (the warm start, or the given model)       = (H0, M0)
    harness-only   the fair arm: the run's h-trial budget, all on generation 0
    weights-only   the fair arm: the run's GRPO steps from generation 0 under the base harness
    co-evolved     the incumbent (accepted harness x accepted checkpoint)                  = (H*, M*)
    final harness on g0                    = (H*, M0)   } the 2x2's
    base harness on the final checkpoint   = (H0, M*)   } other cells

Every distinct pair is scored once on the in-distribution test and once on the held-out block, and each
result is saved as it lands, so a resumed run scores nothing twice. Then: each row's paired gain over
the baseline; the 2x2's harness effect, model effect and interaction (coevo.evaluate.stats.two_by_two);
and the verdict: does co-evolved beat both fair arms beyond the paired 95% interval?
"""

from __future__ import annotations

from typing import Any

from coevo.outcomes import SUMMARY_METRICS
from coevo.search import plots
from coevo.search.context import RunContext
from coevo.search.final_table import H0_M_STAR, H_STAR_M0, markdown
from coevo.search.schedule import HARNESS_ARM, WEIGHTS_ARM
from coevo.search.state import HeldOut, Pair, RunState, TableRow, Verdict

ROWS = ("baseline", HARNESS_ARM, WEIGHTS_ARM, "co-evolved", H_STAR_M0, H0_M_STAR)
ARMS = (HARNESS_ARM, WEIGHTS_ARM)
MIN_TASKS = 30
"""Below this many tasks a split is too small to decide anything: the table says so."""


def row_pairs(state: RunState) -> dict[str, Pair]:
    """Row -> the pair it scores (the arms only when they ran)."""
    base, inc = state.baseline, state.incumbent
    g0 = base.checkpoint
    rows = {"baseline": base, **{arm: state.arms[arm] for arm in ARMS if arm in state.arms}, "co-evolved": inc,
            H_STAR_M0: inc.model_copy(update={"checkpoint": g0, "generation": 0}),
            H0_M_STAR: base.model_copy(update={"checkpoint": inc.checkpoint, "generation": inc.generation,
                                               "source": "base harness"})}
    return rows


def test_table(ctx: RunContext, name: str, run_id: str) -> dict[str, TableRow]:
    """Score the rows (a resumed run skips what it has), then gains, the 2x2 and the verdict, logged to
    MLflow under the parent run and printed."""
    state = ctx.ledger.state
    for row, pair in row_pairs(state).items():
        _score_row(ctx, run_id, row, pair)
    state.verdict = conclude(state, ctx.inputs.config.seed, ctx.inputs.sizes(), ctx.inputs.config.arms)
    _log(ctx, state)
    text = markdown(state, ctx.inputs)
    ctx.tracker.text(state.parent_run, text, "test_table.md")
    ctx.tracker.text(state.parent_run, _json(state), "test_table.json")
    plots.log_capability(ctx.tracker, state.parent_run, state.history, state.test)
    plots.log_two_by_two(ctx.tracker, state.parent_run, state.test, state.verdict)
    plots.log_search(ctx.tracker, state.parent_run, state, ctx.run_dir, ctx.inputs.config.margin,
                     "pass@1" if ctx.inputs.config.objective == "pass_at_1" else "reward")
    ctx.ledger.save()
    ctx.log(text)
    return state.test


def _score_row(ctx: RunContext, run_id: str, row: str, pair: Pair) -> None:
    """The row's test record, then its held-out block; identical pairs share one evaluation."""
    state, inputs = ctx.ledger.state, ctx.inputs
    key = pair.key
    same = next((r for r, v in state.test.items() if v.key == key and r != row), None)
    if row not in state.test:
        if same is not None:
            # the row keeps its own name for the pair: H* on g0 is "n1 #0" even when the harness-only arm
            # drew the same harness first and was scored under its own name
            state.test[row] = state.test[same].model_copy(update={"source": pair.source, "same_as": same})
        else:
            scored, report = ctx.evaluator.evaluate(f"test {row}", run_id, pair.overrides, pair.checkpoint,
                                                    pair.generation, pair.source, task_batches=[inputs.test],
                                                    tags={"row": row, "role": "test"})
            state.test[row] = TableRow(**{**scored.model_dump(), **summary_of(report)})
        ctx.ledger.save()
    record = state.test[row]
    if inputs.held_out and record.held_out is None:
        if same is not None and state.test[same].held_out is not None:
            record.held_out = state.test[same].held_out
        else:
            scored, report = ctx.evaluator.evaluate(f"held-out {row}", run_id, pair.overrides, pair.checkpoint,
                                                    pair.generation, pair.source, task_batches=[inputs.held_out],
                                                    tags={"row": row, "role": "held_out"})
            record.held_out = HeldOut(per_task=scored.per_task, score=scored.score, **summary_of(report))
        ctx.ledger.save()


def summary_of(report) -> dict[str, Any]:
    return {k: getattr(report.overall, k) for k in SUMMARY_METRICS}


def conclude(state: RunState, seed: int, sizes: dict[str, int], arms: bool) -> Verdict:
    """Gains over the baseline, the 2x2, the verdict against the fair arms, and warnings."""
    from coevo.evaluate.stats import paired_gain, two_by_two

    test = state.test
    base = test["baseline"].per_task
    for record in test.values():
        g = paired_gain(base, record.per_task, seed=seed)
        record.gain, record.gain_low, record.gain_high = g.gain, g.low, g.high
    effects = two_by_two(base, test[H0_M_STAR].per_task, test[H_STAR_M0].per_task, test["co-evolved"].per_task,
                         seed=seed)
    versus = {arm: paired_gain(test[arm].per_task, test["co-evolved"].per_task, seed=seed)
              for arm in ARMS if arm in test}
    beats = bool(versus) and len(versus) == len(ARMS) and all(v.low > 0 for v in versus.values())
    warnings = []
    for role in ("test", "promotion"):
        if sizes[role] < MIN_TASKS:
            warnings.append(f"the {role} split has only {sizes[role]} tasks (fewer than {MIN_TASKS}): too few to "
                            "decide")
    if all(len(set(r.per_task.values())) <= 1 for r in test.values()):
        warnings.append("every pair scored all test tasks alike (no variance): the test cannot tell pairs apart")
    if not arms:
        warnings.append("the fair single-lever arms were skipped (arms: false): the table lacks them, "
                        "and there is no verdict")
    return Verdict(effects=effects, versus=versus, beats_both_arms=beats, warnings=warnings)


def _log(ctx: RunContext, state: RunState) -> None:
    parent, v = state.parent_run, state.verdict
    metrics = {f"test/{row}/{k}": getattr(r, k) for row, r in state.test.items()
               for k in ("pass_at_1", "ci_low", "ci_high", "mean_reward", "score", "gain", "gain_low", "gain_high")}
    metrics |= {f"held_out/{row}/{k}": getattr(r.held_out, k) for row, r in state.test.items() if r.held_out
                for k in ("pass_at_1", "ci_low", "ci_high", "mean_reward")}
    metrics |= {f"test/2x2/{name}{suffix}": value for name, triple in v.effects.items()
                for suffix, value in zip(("", "_low", "_high"), triple, strict=True)}
    metrics |= {f"test/co-evolved/vs_{arm}/{k}": getattr(g, k) for arm, g in v.versus.items()
                for k in ("gain", "low", "high", "wins", "losses", "ties")}
    metrics["test/co-evolved/beats_both_arms"] = float(v.beats_both_arms)
    metrics |= {f"wall_seconds/{phase}": s for phase, s in state.timings.items()}
    metrics |= ctx.tracker.trace_metrics()  # this process's: a resumed run counts from its resume
    ctx.tracker.metrics(parent, metrics)
    ctx.tracker.tags(parent, {"warnings": " | ".join(v.warnings) or "none"})


def _json(state: RunState) -> str:
    import json

    rows = {row: r.model_dump(exclude_none=True) for row, r in state.test.items()}
    return json.dumps({"rows": rows, "verdict": state.verdict.model_dump(), "history": [
        h.model_dump() for h in state.history], "timings": state.timings}, indent=1)
