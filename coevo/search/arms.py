"""The fair single-lever arms: what the co-evolved run's budget buys when only one lever moves.

    harness-only   the run's whole h-trial budget (trials per h-phase x h-phases), all on generation 0.
                   The h-phases that ran on generation 0 before any training count towards it: their
                   trials are copied into the arm's study, which then runs the rest.
    weights-only   the run's GRPO steps (steps per w-phase x w-phases), in one run from generation 0
                   under the base harness, with the first w-phase's seed: its own checkpoint.

A nested schedule (n-phases, coevo/search/nested.py) counts its trials as h-trials for the harness arm (the
same trials with no inner training), and gives the weights arm the same number of inner trainings, all
under the base harness, the best picked on the promotion tasks (`nested.weights_arm`).

Each arm's best pair then goes through the same promotion rule as the co-evolved candidates, against the
baseline; an arm whose candidate is rejected reports the baseline pair, exactly as co-evolution would have.
Results go into state.json (`arms`), so a resumed run never redoes a finished arm.
"""

from __future__ import annotations

import time

from coevo.search.context import RunContext
from coevo.search.harness_phase import HarnessObjective, pair_of
from coevo.search.schedule import HARNESS_ARM, WEIGHTS_ARM, Kind, Phase, count
from coevo.search.state import Budget, Pair

UNITS = {HARNESS_ARM: "h-trials on generation 0", WEIGHTS_ARM: "GRPO steps from generation 0 under the base harness"}


def fair_arms(ctx: RunContext, name: str, run_id: str) -> None:
    state = ctx.ledger.state
    ctx.evaluator.evolve_batches = ctx.inputs.dev_batches  # the original evolve set (see curriculum.py)
    from coevo.search import nested

    weights = nested.weights_arm if count(ctx.inputs.schedule, Kind.N) else weights_arm
    for arm, build in ((HARNESS_ARM, harness_arm), (WEIGHTS_ARM, weights)):
        if arm in state.arms:
            continue
        started = time.monotonic()
        candidate, budget = build(ctx, run_id)
        accepted = False
        if budget:
            decision = ctx.incumbent.decide(state.baseline, candidate, run_id)
            ctx.incumbent.record(f"arm {arm}", candidate, state.baseline, decision)
            accepted = decision.accepted
        else:
            ctx.log(f"arm {arm}: the schedule spends nothing on this lever, so the arm is the baseline")
        state.arms[arm] = candidate if accepted else state.baseline
        seconds = round(time.monotonic() - started, 1)
        unit = state.budgets[arm].unit if arm in state.budgets else UNITS[arm]
        state.budgets[arm] = Budget(budget=budget, unit=unit, wall_seconds=seconds)
        ctx.tracker.metrics(run_id, {f"{arm}/budget": budget, f"{arm}/accepted": float(accepted),
                                     f"{arm}/wall_seconds": seconds})
        ctx.ledger.save()


def h_phases_on_g0(phases: list[Phase]) -> list[str]:
    """The h-phases before the first w- or n-phase (the first to train): they searched on generation 0."""
    first_w = next((i for i, p in enumerate(phases) if p.kind in (Kind.W, Kind.N)), len(phases))
    return [p.name for p in phases[:first_w] if p.kind is Kind.H]


def harness_budget(ctx: RunContext) -> int:
    """h-trials, and nested trials (which the arm runs without their inner training)."""
    schedule = ctx.inputs.schedule
    return ctx.inputs.plan.trials * (count(schedule, Kind.H) + count(schedule, Kind.N))


def weights_budget(ctx: RunContext) -> int:
    """GRPO steps (train.mode rl), or rounds of a harvest and its training (sft, auto): what the run's
    w-phases spent."""
    from coevo.search.weights import train_spec

    w_phases = count(ctx.inputs.schedule, Kind.W)
    runs = ctx.inputs.plan.train_trials if ctx.inputs.space.train_params else 1
    per_phase = ctx.inputs.plan.grpo_steps if train_spec(ctx, {}).mode == "rl" else 1
    return per_phase * w_phases * runs


def harness_arm(ctx: RunContext, run_id: str) -> tuple[Pair, int]:
    from coevo.search.instructions.evolve import arm_instructions, widened
    from coevo.search.study import FINISHED, phase_study, run_trials, top_trials

    config, baseline, budget = ctx.inputs.config, ctx.ledger.state.baseline, harness_budget(ctx)
    if budget == 0:  # the run searched no harness: neither does its arm
        return baseline, 0
    study = phase_study(ctx, "arm-harness")  # its sampler is seeded per trial (run_trials): a resume stays exact
    arm_instructions(ctx, h_phases_on_g0(ctx.inputs.schedule), run_id, baseline)  # evolve keys: g0's GEPA texts
    if study.trials:  # a resume: what it copied, and any trials of its own, are in its study already
        where = f"resumed, {len(study.trials)} trials in its study"
    else:
        copied = [t for phase in h_phases_on_g0(ctx.inputs.schedule) for t in widened(
            ctx.inputs.space, phase_study(ctx, phase).get_trials(deepcopy=False, states=FINISHED))]
        study.add_trials(copied)
        where = f"{len(copied)} from the run's g0 h-phases"
    ctx.log(f"arm {HARNESS_ARM}: {budget} h-trials on generation 0 ({where})")
    # Seeded trials (w0's robustness pairs) were scored before any h-phase, for both arms alike: on top.
    seeded = sum("source" in t.user_attrs for t in study.get_trials(deepcopy=False))
    objective = HarnessObjective(ctx, "arm-harness", run_id, study.study_name, start=baseline)
    run_trials(ctx, study, budget + seeded, objective, config.seed)
    best = top_trials(study, 1)
    return (pair_of(best[0], ctx, "arm-harness", start=baseline) if best else baseline), budget


def weights_arm(ctx: RunContext, run_id: str) -> tuple[Pair, int]:
    """rl: one GRPO run of all the steps; sft and auto: one harvest + SFT round per w-phase, chained, with
    the seeds the run's w-phases use. Both from generation 0, under the base harness."""
    from coevo.search.weights import train_once, train_spec

    config, baseline, budget = ctx.inputs.config, ctx.ledger.state.baseline, weights_budget(ctx)
    if budget == 0:  # the run trained no weights: neither does its arm
        return baseline, 0
    mode = train_spec(ctx, {}).mode
    rl = mode == "rl"
    if not rl:
        # sft: a harvest and self-SFT; auto: a harvest, then GRPO on its frontier or self-SFT on its successes
        what = "harvest + SFT" if mode == "sft" else "harvest + GRPO-or-SFT"
        ctx.ledger.state.budgets[WEIGHTS_ARM] = Budget(unit=f"{what} rounds from generation 0 under the base harness")

    def round_(i: int, ckpt: str) -> dict:
        out = ctx.run_dir / "checkpoints" / ("arm-weights" if rl else f"arm-weights-r{i}")
        start = baseline.model_copy(update={"checkpoint": ckpt})
        try:
            ckpt = train_once(ctx, start, f"arm {WEIGHTS_ARM}", run_id, {}, out, steps=budget if rl else None,
                              seed=config.seed + i)
        except Exception as e:  # noqa: BLE001 - boundary: a failed arm keeps its weights, like a w-phase
            ctx.log(f"arm {WEIGHTS_ARM}: training failed, the arm keeps {ckpt}: {type(e).__name__}: {e}"[:400])
        return {"checkpoint": str(ckpt)}

    ckpt = baseline.checkpoint
    for i in range(1 if rl else budget):
        ckpt = ctx.ledger.memo(f"arm weights round {i}", lambda i=i, ckpt=ckpt: round_(i, ckpt))["checkpoint"]
    if ckpt == baseline.checkpoint:
        return baseline, budget
    pair, _ = ctx.evaluator.evaluate(f"arm {WEIGHTS_ARM}", run_id, {}, ckpt, 1, f"arm {WEIGHTS_ARM}",
                                     tags={"arm": WEIGHTS_ARM})
    return pair, budget
