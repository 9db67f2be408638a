"""The w-phase: GRPO on the train split under the accepted harness, then the top harnesses re-scored on
the new checkpoint (the best harness for a checkpoint changes after training).

Training starts from the incumbent's checkpoint. When the space has train.* keys and the plan allows more
than one training run, the runs form their own small Optuna study (value: dev pass@1 of the accepted
harness on the trained checkpoint); otherwise one run uses the config's `train` options.
"""

from __future__ import annotations

from typing import Any

GRPO_DEFAULTS = {"tasks_per_step": 4, "group_size": 4, "save_rollouts": False, "keep_checkpoints": 1}
"""Small steps by default: one step is tasks_per_step x group_size episodes on CPU."""


def weights_phase(s, name: str, run_id: str) -> None:
    from coevo.search.phases import challenge

    trained = s.state.step("trained")
    if trained is None:
        try:
            ckpt, train_values = (train_study(s, name, run_id) if s.space.train_params and s.plan.train_trials > 1
                                  else (train_once(s, name, run_id, run_id, {}, s.run_dir / "checkpoints" / name), {}))
        except Exception as e:  # noqa: BLE001 - boundary: a failed w-phase keeps the weights, the search goes on
            cause = f"{type(e).__name__}: {e}"
            s.tracker.tags(run_id, {"error": cause[:5000]})
            s.log(f"{name}: GRPO failed, the checkpoint stays {s.state.incumbent.checkpoint}: {cause[:300]}")
            ckpt, train_values = s.state.incumbent.checkpoint, {}
        s.state.checkpoints.append(str(ckpt))
        trained = s.done_step("trained", checkpoint=str(ckpt), train=train_values)
        s.tracker.tags(run_id, {"checkpoint": str(ckpt)})
    rescored = rescore(s, name, run_id, trained.data["train"])
    best = max(rescored, key=lambda p: p.score)
    accepted = challenge(s, best, name)
    s.state.pool = sorted(rescored, key=lambda p: -p.score)[: s.plan.top_k]
    s.tracker.metrics(run_id, {"rescored": len(rescored), "best_objective": best.score,
                               "accepted": float(accepted)})
    s.save()


def grpo_spec(s, values: dict[str, Any]):
    from coevo.train.grpo_spec import spec_from_dict

    data = {**GRPO_DEFAULTS, **s.config.train, "steps": s.plan.grpo_steps, "report_to": "none",
            "seed": s.config.seed + s.generation}
    return spec_from_dict(data, f"{s.config.name}: train").with_overrides(values)


def train_once(s, name: str, phase_run: str, log_run: str, values: dict[str, Any], out) -> str:
    """One GRPO run from the incumbent's checkpoint under its harness; resumes a killed run in `out`.
    Its per-step metrics go to `log_run` (the phase run, or the trial's run)."""
    from coevo.train.checkpoint import last_checkpoint
    from coevo.train.grpo import train_grpo

    incumbent = s.state.incumbent
    spec = grpo_spec(s, values)
    harness = s.harness(incumbent.overrides)
    s.log(f"{name}: GRPO {spec.steps} steps x {spec.batch_size} episodes from {incumbent.checkpoint} under "
          f"{incumbent.source}'s harness")
    s.tracker.params(log_run, {f"grpo.{k}": v for k, v in spec.model_dump(mode="json").items()})
    result = train_grpo(incumbent.checkpoint, harness, s.train_tasks, out, spec,
                        resume=last_checkpoint(out) is not None)
    for record in result.metrics:
        step = int(record.get("step", 0))
        numbers = {k: v for k, v in record.items() if k != "step" and isinstance(v, int | float)}
        s.tracker.metrics(log_run, {f"grpo/{k}": v for k, v in numbers.items()}, step=step)
    return str(result.checkpoint)


def train_study(s, name: str, run_id: str) -> tuple[str, dict]:
    """Several GRPO runs over the space's train.* keys; the best checkpoint on dev wins."""
    from coevo.search.study import make_pruner, make_sampler, open_study, optimize_until, top_trials

    study_name = f"{s.config.name}.{name}"
    study = open_study(s.storage, study_name, make_sampler(s.config.sampler, s.config.seed, s.plan.train_trials),
                       make_pruner(False))
    if not study.trials:  # the config's own options first: a known reference point
        defaults = grpo_spec(s, {})
        study.enqueue_trial({p.path: _get(defaults, p.path.removeprefix("train.")) for p in s.space.train_params},
                            skip_if_exists=True)
    optimize_until(study, s.plan.train_trials, TrainObjective(s, name, run_id, study_name), s.config.grace_period,
                   wait_for_stale=s.resume)
    best = top_trials(study, 1)[0]
    return best.user_attrs["checkpoint"], {k.removeprefix("train."): v for k, v in best.params.items()}


class TrainObjective:
    def __init__(self, s, name: str, run_id: str, study_name: str):
        self.s, self.name, self.run_id, self.study_name = s, name, run_id, study_name

    def __call__(self, trial) -> float:
        from coevo.search.space import split_overrides
        from coevo.search.study import retried_from

        s = self.s
        _, values = split_overrides(s.space.suggest(trial, s.space.train_params))
        number = retried_from(trial) or trial.number  # a retried run resumes the killed run's checkpoints
        label = f"{self.name} train #{trial.number}"
        out = s.run_dir / "checkpoints" / f"{self.name}-t{number}"
        trial_run = s.tracker.start(label, self.run_id, {"phase": self.name, "trial": trial.number, "study": self.study_name})
        try:
            ckpt = train_once(s, self.name, self.run_id, trial_run, values, out)
            s.tracker.end(trial_run)
            pair, _ = s.evaluate(f"{label} eval", self.run_id, s.state.incumbent.overrides, ckpt, s.generation + 1,
                                 f"{self.name} train #{trial.number}", train=values)
        except Exception as e:  # noqa: BLE001 - boundary: a failed training run scores 0, the study goes on
            cause = f"{type(e).__name__}: {e}"
            trial.set_user_attr("error", cause[:2000])
            s.tracker.tags(trial_run, {"error": cause})
            s.tracker.end(trial_run, "FAILED")
            s.log(f"{label}: failed, scored 0: {cause[:300]}")
            return 0.0
        trial.set_user_attr("checkpoint", ckpt)
        return pair.score


def _get(spec, path: str):
    node = spec.model_dump(mode="json")
    for part in path.split("."):
        node = node[part]
    return node


def rescore(s, name: str, run_id: str, train_values: dict) -> list:
    """The incumbent's harness and the pool's, scored on the new checkpoint (each one a resumable step)."""
    from coevo.search.state import Pair

    candidates, seen = [], set()
    for pair in [s.state.incumbent, *s.state.pool]:
        key = repr(sorted(pair.overrides.items()))
        if key not in seen:
            seen.add(key)
            candidates.append(pair)
    out = []
    for i, old in enumerate(candidates):
        step = s.state.step(f"rescore {i}")
        if step is None:
            origin = old.source.split(" on g")[0]
            pair, _ = s.evaluate(f"{name} rescore {origin}", run_id, old.overrides, s.checkpoint, s.generation,
                                 f"{origin} on g{s.generation}", train=train_values, tags={"rescore": "1"})
            step = s.done_step(f"rescore {i}", pair=pair.model_dump())
            s.log(f"{name}: re-scored {origin} on g{s.generation}: dev pass@1 {pair.pass_at_1:.3f} "
                  f"[{pair.ci_low:.3f}, {pair.ci_high:.3f}], objective {pair.score:.3f}")
        out.append(Pair.model_validate(step.data["pair"]))
    return out
