"""The phases of a schedule: w0 (warm start), h (harness search), w (GRPO, then re-scoring).

Every phase changes the incumbent (the accepted (harness, checkpoint) pair) only through `challenge`: a
paired bootstrap over the dev tasks both were scored on, accepting only a gain whose 95% interval lies
above zero. Each unit of work is recorded as a step in state.json as it finishes, so a resumed phase
continues where the killed one stopped (Optuna's storage does the same for trials).
"""

from __future__ import annotations

from pathlib import Path

from coevo.search.state import Pair


def ensure_start(s) -> None:
    """Generation 0 (the given model, or the tiny model built here) and the baseline pair on dev."""
    if not s.state.checkpoints:
        s.state.checkpoints = [str(start_model(s))]
        s.save()
    if s.state.baseline is None:
        s.log("scoring the baseline (base harness, generation-0 checkpoint) on dev")
        parent = s.state.phase_runs.get("w0") or s.state.parent_run
        pair, _ = s.evaluate("baseline", parent, {}, s.state.checkpoints[0], 0, "baseline")
        s.state.baseline = s.state.incumbent = pair
        s.state.history.append(_point(s, "start", "baseline", True, 0.0, 0.0, 0.0))
        s.save()
        s.log(f"baseline dev {_ci(pair)}")


def start_model(s) -> Path:
    if s.config.model is not None:
        return s.config.model
    folder = s.run_dir / "model"
    if not (folder / "config.json").is_file():
        from coevo.train.model import build_tiny_model

        s.log(f"building the tiny model in {folder}")
        prompts = s.base.prompts_path
        build_tiny_model(folder, s.config.tasks, seed=s.config.seed, prompts_dir=prompts if prompts.is_dir() else None)
    return folder


def warm_start(s, name: str, run_id: str) -> None:
    """SFT on the oracle's passing episodes (train split, plus generated extra instances when the plan
    says so) rendered through the base harness: `coevo warmstart` inside the search."""
    import shutil

    from coevo.train.sft import SFTSettings
    from coevo.train.warmstart import warm_start as sft_warm_start

    out = s.run_dir / "checkpoints" / "w0"
    if not (out / "config.json").is_file():
        model = start_model(s)
        settings = SFTSettings(seed=s.config.seed, epochs=s.plan.warmstart_epochs)
        staging = out.with_name("w0.staging")
        shutil.rmtree(staging, ignore_errors=True)
        s.log(f"w0: SFT on the oracle's episodes ({len(s.train_tasks)} train tasks + "
              f"{s.plan.warmstart_augment} extra instances per family), {settings.epochs:g} epochs")
        numbers = sft_warm_start(model, s.base, s.train_tasks, staging, settings, s.plan.warmstart_augment,
                                 s.config.tasks, source=f"w0 ({s.config.harness})")
        for junk in staging.glob("checkpoint-*"):
            shutil.rmtree(junk, ignore_errors=True)
        staging.rename(out)  # a killed SFT leaves only the staging folder, redone on resume
        s.tracker.metrics(run_id, {"oracle_passed": numbers["oracle_passed"], "oracle_episodes": numbers["tasks"],
                                   "sft_conversations": numbers["conversations"], "sft_epochs": settings.epochs,
                                   "w0_seconds": numbers["oracle_s"] + numbers["sft_s"]})
        s.tracker.params(run_id, {"base_model": str(model), "harness": str(s.config.harness)})
    s.state.checkpoints = [str(out)]
    s.tracker.tags(run_id, {"checkpoint": str(out)})
    s.save()
    ensure_start(s)


def harness_phase(s, name: str, run_id: str) -> None:
    """An Optuna study over the space's harness keys, scored on dev with the current checkpoint."""
    from coevo.search import plots
    from coevo.search.study import make_pruner, make_sampler, open_study, optimize_until, top_trials

    study_name = f"{s.config.name}.{name}"
    sampler = make_sampler(s.config.sampler, s.config.seed + s.phases.index(name), s.plan.trials)
    study = open_study(s.storage, study_name, sampler, make_pruner(s.config.pruning, len(s.dev_batches)))
    seeded = s.state.step("seeded")
    if seeded is None:
        seeded = s.done_step("seeded", trials=seed_pool(s, study))
    objective = HarnessObjective(s, name, run_id, study_name)
    optimize_until(study, s.plan.trials + seeded.data["trials"], objective, s.config.grace_period,
                   wait_for_stale=s.resume)
    top = [pair_of(t, s, name) for t in top_trials(study, s.plan.top_k)]
    accepted = bool(top) and challenge(s, top[0], name)
    s.state.pool = top
    if s.generation == 0 and s.state.harness_only is None:
        s.state.harness_only = s.state.incumbent
    trials = study.get_trials(deepcopy=False)
    s.tracker.metrics(run_id, {"trials": len(trials), "best_objective": top[0].score if top else 0.0,
                               "pruned": sum(t.state.name == "PRUNED" for t in trials),
                               "accepted": float(accepted)})
    plots.log_study(s.tracker, run_id, study)
    s.save()


class HarnessObjective:
    """One h-phase trial: sample a harness, score it on dev batches (pruned when weak). A failure is the
    trial's score of 0 with its cause recorded (Optuna user attr + MLflow tag), never a crash of the run."""

    def __init__(self, s, name: str, run_id: str, study_name: str):
        self.s, self.name, self.run_id, self.study_name = s, name, run_id, study_name
        self.calls = 0
        """Trials this process ran (a `--join` worker reports it)."""

    def __call__(self, trial) -> float:
        import optuna

        from coevo.search.scoring import Pruned
        from coevo.search.study import retried_from

        s = self.s
        self.calls += 1
        values = s.space.suggest(trial, s.space.harness_params)
        retry = retried_from(trial)
        tags = {"trial": trial.number, "study": self.study_name, **({"retry_of": retry} if retry is not None else {})}
        label = f"{self.name} #{trial.number}"
        try:
            pair, report = s.evaluate(label, self.run_id, values, s.checkpoint, s.generation, label, trial=trial,
                                      tags=tags)
        except Pruned as p:
            trial.set_user_attr("episodes", p.partial.overall.episodes)
            s.log(f"{label}: {p}")
            raise optuna.TrialPruned(str(p)) from None
        except Exception as e:  # noqa: BLE001 - boundary: a failing trial is data, the study goes on
            cause = f"{type(e).__name__}: {e}"
            trial.set_user_attr("error", cause[:2000])
            s.log(f"{label}: failed, scored 0: {cause[:300]}")
            return 0.0
        for key, value in {"per_task": pair.per_task, "pass_at_1": pair.pass_at_1, "ci_low": pair.ci_low,
                           "ci_high": pair.ci_high, "mlflow_run": pair.mlflow_run,
                           "episodes": report.overall.episodes}.items():
            trial.set_user_attr(key, value)
        s.log(f"{label}: dev {_ci(pair)}")
        return pair.score


def seed_pool(s, study) -> int:
    """Pairs already scored on the current checkpoint (the re-scored pool) enter the new study as finished
    trials: TPE starts from them for free."""
    import optuna

    added = 0
    for pair in s.state.pool:
        if pair.checkpoint != s.checkpoint or not pair.overrides:
            continue
        dists = s.space.distributions(pair.overrides)
        params = {k: v for k, v in pair.overrides.items() if k in dists}
        try:
            study.add_trial(optuna.trial.create_trial(
                params=params, distributions=dists, value=pair.score,
                user_attrs={"per_task": pair.per_task, "pass_at_1": pair.pass_at_1, "ci_low": pair.ci_low,
                            "ci_high": pair.ci_high,
                            "mlflow_run": pair.mlflow_run, "source": pair.source, "episodes": 0}))
            added += 1
        except ValueError as e:  # a value outside this space's ranges: just not seeded
            s.log(f"not seeding {pair.source}: {e}")
    return added


def pair_of(trial, s, phase: str) -> Pair:
    attrs = trial.user_attrs
    return Pair(overrides=s.space.resolve(trial.params), checkpoint=s.checkpoint, generation=s.generation,
                source=attrs.get("source", f"{phase} #{trial.number}"), score=trial.value,
                pass_at_1=attrs.get("pass_at_1", 0.0),
                ci_low=attrs.get("ci_low", 0.0), ci_high=attrs.get("ci_high", 0.0), per_task=attrs.get("per_task", {}),
                mlflow_run=attrs.get("mlflow_run"), trial=trial.number)


def challenge(s, challenger: Pair, phase: str) -> bool:
    """Replace the incumbent only if the paired bootstrap's 95% interval of the gain lies above 0."""
    from coevo.evaluate import paired_bootstrap

    incumbent = s.state.incumbent
    gain, low, high = paired_bootstrap(incumbent.per_task, challenger.per_task, seed=s.config.seed)
    accepted = low > 0
    verdict = "accepted" if accepted else "kept the incumbent"
    s.log(f"{phase}: {challenger.source} {_ci(challenger)} vs incumbent {incumbent.source} {_ci(incumbent)}: "
          f"gain {gain:+.3f} [{low:+.3f}, {high:+.3f}] -> {verdict}")
    if accepted:
        s.state.incumbent = challenger
    s.state.history.append(_point(s, phase, challenger.source, accepted, gain, low, high))
    return accepted


def _point(s, phase: str, challenger: str, accepted: bool, gain: float, low: float, high: float) -> dict:
    inc = s.state.incumbent
    return {"phase": phase, "generation": s.generation, "challenger": challenger, "accepted": accepted,
            "gain": gain, "gain_low": low, "gain_high": high, "incumbent": inc.source,
            "score": inc.score, "pass_at_1": inc.pass_at_1, "ci_low": inc.ci_low, "ci_high": inc.ci_high}


def _ci(pair: Pair) -> str:
    text = f"pass@1 {pair.pass_at_1:.3f} [{pair.ci_low:.3f}, {pair.ci_high:.3f}]"
    return text if pair.score == pair.pass_at_1 else f"{text}, objective {pair.score:.3f}"


from coevo.search.weights import weights_phase  # kept in its own file; re-exported here

__all__ = ["challenge", "ensure_start", "harness_phase", "warm_start", "weights_phase"]
