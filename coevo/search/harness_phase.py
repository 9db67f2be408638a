"""The h-phase: an Optuna study over the space's harness keys, each trial scored on the evolve set (dev)
with the incumbent's checkpoint; the best trial then challenges the incumbent on the promotion tasks, and
the top-k harnesses become the pool that the next w-phase re-scores on its new checkpoint."""

from __future__ import annotations

import json

from coevo.search.context import RunContext
from coevo.search.ratchet import Candidate
from coevo.search.state import Focus, Pair


def harness_phase(ctx: RunContext, name: str, run_id: str) -> None:
    from coevo.search.instructions.evolve import evolve_instructions
    from coevo.search.study import optimize_until, phase_study, top_trials

    evolve_instructions(ctx, name, run_id)  # GEPA's texts become the choices of the space's `evolve` keys
    config, plan, ledger = ctx.inputs.config, ctx.inputs.plan, ctx.ledger
    study = phase_study(ctx, name, config.seed + ctx.inputs.phases.index(name), plan.trials)
    seeded = ledger.memo("seeded", lambda: {"trials": seed_pool(ctx, study)})["trials"]
    ledger.memo("focused", lambda: {"trials": focus(ctx, study, run_id, name)})
    objective = HarnessObjective(ctx, name, run_id, study.study_name)
    optimize_until(study, plan.trials + seeded, objective, config.grace_period, wait_for_stale=ctx.resume)
    top = [pair_of(t, ctx, name) for t in top_trials(study, plan.top_k)]
    accepted = bool(top) and ctx.incumbent.challenge(Candidate(top[0], name), run_id, "challenge").accepted
    ledger.state.pool = top
    close_phase(ctx, name, run_id, study, top[0].score if top else 0.0, accepted)


def close_phase(ctx: RunContext, name: str, run_id: str, study, best: float, accepted: bool) -> None:
    """What every searched phase (h, n) records at its end: its counts, importances and plot, then saves."""
    from coevo.search import plots

    trials = study.get_trials(deepcopy=False)
    ctx.tracker.metrics(run_id, {"trials": len(trials), "best_objective": best,
                                 "pruned": sum(t.state.name == "PRUNED" for t in trials),
                                 "accepted": float(accepted)})
    log_importances(ctx, name, run_id, study)
    plots.log_study(ctx.tracker, run_id, study)
    ctx.ledger.save()


def focus(ctx: RunContext, study, run_id: str, name: str) -> int:
    """Log the incumbent's failure clusters and enqueue the trials that address the largest (failures.py);
    returns how many were enqueued (they count towards the phase's trials)."""
    from coevo.search.failures import describe, focused_trials, largest

    pair, generation, target = ctx.incumbent.pair, ctx.ledger.generation, largest(ctx.incumbent.pair.failures)
    trials = focused_trials(ctx.inputs.space, ctx.inputs.harness(pair.overrides), pair.failures,
                            max(1, ctx.inputs.plan.trials // 2))
    for params in trials:
        study.enqueue_trial(params, user_attrs={"focus": target}, skip_if_exists=True)
    record = ctx.ledger.state.failures[name] = Focus(failures=pair.failures, focus=target, trials=len(trials))
    ctx.tracker.metrics(run_id, {f"failures/{c}": n for c, n in pair.failures.items()}, step=generation)
    ctx.tracker.text(run_id, json.dumps({"generation": generation, "incumbent": pair.source,
                                         **record.model_dump()}, indent=1), "failures.json")
    ctx.log(f"{name}: incumbent ({pair.source}) on the evolve set: {describe(pair.failures)}"
            + (f"; focus on {target}: {len(trials)} trials enqueued" if trials else ""))
    return len(trials)


def log_importances(ctx: RunContext, name: str, run_id: str, study) -> dict[str, float]:
    """Optuna's parameter importances (fANOVA) of the phase: which dimensions mattered; {} when the phase
    has too few complete trials, or none that differ."""
    import warnings

    import optuna

    try:
        with warnings.catch_warnings():  # "few trials in some regime": true of every short phase
            warnings.simplefilter("ignore")
            importances = optuna.importance.get_param_importances(study)
    except (ValueError, RuntimeError, ZeroDivisionError, IndexError):
        return {}
    ctx.tracker.metrics(run_id, {f"importance/{k}": v for k, v in importances.items()})
    top = ", ".join(f"{k} {v:.2f}" for k, v in list(importances.items())[:5])
    ctx.log(f"{name}: parameter importances: {top}")
    ctx.ledger.state.importances[name] = importances
    return importances


class HarnessObjective:
    """One h-phase trial: sample a harness, score it on dev batches (pruned when weak). A failure is the
    trial's score of 0 with its cause recorded (Optuna user attr + MLflow tag), never a crash of the run."""

    def __init__(self, ctx: RunContext, name: str, run_id: str, study_name: str, start: Pair | None = None):
        self.ctx, self.name, self.run_id, self.study_name = ctx, name, run_id, study_name
        self.start = start
        """The pair whose checkpoint trials run on; None: the incumbent's at each trial (a rejected
        checkpoint is never searched on)."""
        self.calls = 0
        """Trials this process ran (a `--join` worker reports it)."""
        self.slot: int | None = None
        """Trials finished before this one, when the caller seeds the sampler per trial (study.run_trials):
        its label, the same for a killed trial's retry as in a straight run. None: the trial's number."""

    def __call__(self, trial) -> float:
        import optuna

        from coevo.search.scoring import Pruned
        from coevo.search.study import retried_from

        ctx = self.ctx
        self.calls += 1
        values = ctx.inputs.space.suggest(trial, ctx.inputs.space.harness_params)
        retry = retried_from(trial)
        tags = {"trial": trial.number, "study": self.study_name, **({"retry_of": retry} if retry is not None else {})}
        label = f"{self.name} #{trial.number if self.slot is None else self.slot}"
        try:
            start = self.start or ctx.incumbent.pair
            pair, report = ctx.evaluator.evaluate(label, self.run_id, values, start.checkpoint,
                                                  start.generation, label, trial=trial, tags=tags)
        except Pruned as p:
            trial.set_user_attr("episodes", p.partial.overall.episodes)
            ctx.log(f"{label}: {p}")
            raise optuna.TrialPruned(str(p)) from None
        except Exception as e:  # noqa: BLE001 - boundary: a failing trial is data, the study goes on
            cause = f"{type(e).__name__}: {e}"
            trial.set_user_attr("error", cause[:2000])
            ctx.log(f"{label}: failed, scored 0: {cause[:300]}")
            return 0.0
        for key, value in {**pair.to_trial_attrs(), "episodes": report.overall.episodes, "label": label}.items():
            trial.set_user_attr(key, value)
        ctx.log(f"{label}: dev {pair.brief()}")
        return pair.score


def seed_pool(ctx: RunContext, study) -> int:
    """Pairs already scored on the current checkpoint (the re-scored pool) enter the new study as finished
    trials: TPE starts from them for free."""
    import optuna

    added = 0
    for pair in ctx.ledger.state.pool:
        if pair.checkpoint != ctx.incumbent.pair.checkpoint or not pair.overrides:
            continue
        dists = ctx.inputs.space.distributions(pair.overrides)
        params = {k: v for k, v in pair.overrides.items() if k in dists}
        try:
            study.add_trial(optuna.trial.create_trial(
                params=params, distributions=dists, value=pair.score,
                user_attrs={**pair.to_trial_attrs(), "source": pair.source, "episodes": 0}))
            added += 1
        except ValueError as e:  # a value outside this space's ranges: just not seeded
            ctx.log(f"not seeding {pair.source}: {e}")
    return added


def pair_of(trial, ctx: RunContext, phase: str, start: Pair | None = None) -> Pair:
    """A finished trial as a Pair on `start`'s checkpoint, by default the incumbent's (seeded trials keep
    their own source)."""
    start = start or ctx.incumbent.pair
    return Pair.from_trial(trial, ctx.inputs.space.resolve(trial.params), start.checkpoint, start.generation,
                           trial.user_attrs.get("label", f"{phase} #{trial.number}"))
