"""Generation 0 and the warm start: the checkpoint every later phase starts from, and the baseline pair.

The other phases have files of their own: the h-phase in coevo/search/harness_phase.py, the w-phase in
coevo/search/weights.py, the final table in coevo/search/final.py. Every phase changes the incumbent only
through `Incumbent.challenge` (coevo/search/ratchet.py), and records each unit of work as a step in
state.json as it finishes, so a resumed phase continues where the killed one stopped.
"""

from __future__ import annotations

from pathlib import Path

from coevo.search.context import RunContext
from coevo.search.state import Pair


def ensure_start(ctx: RunContext) -> None:
    """Generation 0 (the given model, or the tiny model built here) and the baseline pair on dev."""
    state = ctx.ledger.state
    if not state.checkpoints:
        state.checkpoints = [str(start_model(ctx))]
        ctx.ledger.save()
    if state.baseline is None:
        ctx.log("scoring the baseline (base harness, generation-0 checkpoint) on dev")
        parent = state.phase_runs.get("w0") or state.parent_run
        pair, _ = ctx.evaluator.evaluate("baseline", parent, {}, state.checkpoints[0], 0, "baseline")
        ctx.incumbent.start(pair)
        ctx.ledger.save()
        ctx.log(f"baseline dev {pair.brief()}")


def start_model(ctx: RunContext) -> Path:
    config = ctx.inputs.config
    if config.model is not None:
        return config.model
    folder = ctx.run_dir / "model"
    if not (folder / "config.json").is_file():
        from coevo.native.spec import is_native
        from coevo.train.model import build_tiny_model

        ctx.log(f"building the tiny model in {folder}")
        base = ctx.inputs.base
        native = is_native(base)  # its own templates and action format join the vocabulary's corpus instead
        prompts = None if native else base.prompts_path
        build_tiny_model(folder, config.tasks, seed=config.seed, prompts_dir=prompts if prompts and prompts.is_dir()
                         else None, extra_harnesses=(base,) if native else ())
    return folder


def warm_start(ctx: RunContext, name: str, run_id: str) -> None:
    """SFT on the oracle's passing episodes (train split, plus generated extra instances when the plan
    says so), dealt among the base harness and `plan.warmstart_harnesses` harnesses sampled from the space:
    `coevo warmstart` inside the search. Then each of those harnesses is scored on the evolve set: the
    robustness table, whose pairs also open h1's study."""
    import shutil

    from coevo.train.sft import SFTSettings
    from coevo.train.warmstart import warm_start as sft_warm_start

    config, plan = ctx.inputs.config, ctx.inputs.plan
    out = ctx.run_dir / "checkpoints" / "w0"
    variants = ctx.inputs.space.sample(plan.warmstart_harnesses, config.seed) if plan.warmstart_harnesses else []
    if not (out / "config.json").is_file():
        model = start_model(ctx)
        settings = SFTSettings(seed=config.seed, epochs=plan.warmstart_epochs)
        staging = out.with_name("w0.staging")
        shutil.rmtree(staging, ignore_errors=True)
        harnesses = [ctx.inputs.base, *(ctx.inputs.harness(v) for v in variants)]
        ctx.log(f"w0: SFT on the oracle's episodes ({len(ctx.inputs.train)} train tasks + "
                f"{plan.warmstart_augment} extra instances per family) under {len(harnesses)} harnesses, "
                f"{settings.epochs:g} epochs")
        numbers = sft_warm_start(model, harnesses, ctx.inputs.train, staging, settings, plan.warmstart_augment,
                                 config.tasks, source=f"w0 ({config.harness})", backend=config.sandbox)
        for junk in staging.glob("checkpoint-*"):
            shutil.rmtree(junk, ignore_errors=True)
        staging.rename(out)  # a killed SFT leaves only the staging folder, redone on resume
        ctx.tracker.metrics(run_id, {"oracle_passed": numbers["oracle_passed"], "oracle_episodes": numbers["tasks"],
                                     "sft_conversations": numbers["conversations"], "sft_epochs": settings.epochs,
                                     "warmstart_harnesses": len(harnesses),
                                     "w0_seconds": numbers["oracle_s"] + numbers["sft_s"]})
        ctx.tracker.params(run_id, {"base_model": str(model), "harness": str(config.harness)})
    ctx.ledger.state.checkpoints = [str(out)]
    ctx.tracker.tags(run_id, {"checkpoint": str(out)})
    ctx.ledger.save()
    ensure_start(ctx)
    robustness(ctx, name, run_id, variants)


def robustness(ctx: RunContext, name: str, run_id: str, variants: list[dict]) -> None:
    """Score generation 0 under each warm-start harness on the evolve set (one resumable step each): one row
    per harness in the log, in MLflow (`robustness/<i>/*` metrics and robustness.md) and in state.json. The
    pairs become the pool, so h1's study starts from them."""
    from coevo.config import get_dotted
    from coevo.search.space import describe

    ledger = ctx.ledger

    def variant(i: int, overrides: dict) -> Pair:
        pair, _ = ctx.evaluator.evaluate(f"{name} variant {i}", run_id, overrides, ledger.checkpoint, 0,
                                         f"w0 harness {i}", tags={"robustness": "1"})
        return pair

    pairs = [ledger.memo_pair(f"variant {i}", lambda i=i, o=o: variant(i, o)) for i, o in enumerate(variants, 1)]
    if not pairs:
        return
    base, dumped = ledger.state.baseline, ctx.inputs.base.model_dump(mode="json")
    rows = [("base", base), *((describe({k: v for k, v in p.overrides.items() if get_dotted(dumped, k, None) != v}), p)
                              for p in pairs)]
    lines = ["| harness | evolve pass@1 [95% CI] | objective |", "|---|---|---|"]
    for i, (label, pair) in enumerate(rows):
        lines.append(f"| {label} | {pair.pass_at_1:.3f} [{pair.ci_low:.3f}, {pair.ci_high:.3f}] | {pair.score:.3f} |")
        ctx.tracker.metrics(run_id, {f"robustness/{i}/pass_at_1": pair.pass_at_1, f"robustness/{i}/objective": pair.score})
    above = sum(p.pass_at_1 > 0 for _, p in rows)
    ctx.tracker.metrics(run_id, {"robustness/harnesses_above_0": above})
    ctx.tracker.text(run_id, "\n".join(lines) + "\n", "robustness.md")
    ctx.log(f"w0: generation 0 under {len(rows)} harnesses ({above} pass some evolve task):\n" + "\n".join(lines))
    ledger.state.pool = sorted(pairs, key=lambda p: -p.score)
    ledger.save()
