"""The w-phase: GRPO on the train split under the accepted harness, then the top harnesses re-scored on
the new checkpoint (the best harness for a checkpoint changes after training).

Training starts from the incumbent's checkpoint. When the space has train.* keys and the plan allows more
than one training run, the runs form their own small Optuna study (value: dev pass@1 of the accepted
harness on the trained checkpoint); otherwise one run uses the config's `train` options.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coevo.config import get_dotted
from coevo.search.context import RunContext
from coevo.search.ratchet import Candidate
from coevo.search.state import Pair


def weights_phase(ctx: RunContext, name: str, run_id: str) -> None:
    """Train from the incumbent; its harness on the new checkpoint challenges it (new weights); when the
    weights are promoted, the best re-scored harness on them challenges next (a harness for the new
    weights). A rejected checkpoint stays in the run folder but is never trained on or searched on."""
    from coevo.search import curriculum

    ledger = ctx.ledger
    retiring = curriculum.solved(ctx)  # their successes are harvested with the train tasks', then they leave
    trained = ledger.memo("trained", lambda: train_phase(ctx, name, run_id, extra=retiring))
    curriculum.refresh(ctx, name, run_id, retiring)
    rescored = rescore(ctx, name, run_id, trained["train"])
    weights = ctx.incumbent.challenge(Candidate(rescored[0], name), run_id, "challenge weights").accepted
    best = max(rescored, key=lambda p: p.score)
    if weights:
        ledger.state.pool = sorted(rescored, key=lambda p: -p.score)[: ctx.inputs.plan.top_k]
        if best is not rescored[0]:
            ctx.incumbent.challenge(Candidate(best, name), run_id, "challenge harness")
    elif ledger.state.curriculum and ledger.state.curriculum[-1]["retired"]:
        kept = rescore_kept(ctx, name, run_id)  # evolve scores of the old set would mislead the next h-phase
        ledger.state.incumbent, ledger.state.pool = kept[0], sorted(kept, key=lambda p: -p.score)[: ctx.inputs.plan.top_k]
    ctx.tracker.metrics(run_id, {"rescored": len(rescored), "best_objective": best.score,
                                 "accepted": float(weights)})
    ledger.save()


def train_phase(ctx: RunContext, name: str, run_id: str, extra: list = ()) -> dict[str, Any]:
    """Train from the incumbent (one run, or a study over train.* keys) on the train tasks plus `extra`; a
    failed run keeps the weights. Returns the phase's `trained` step: the checkpoint and the train values."""
    ledger, start = ctx.ledger, ctx.incumbent.pair
    try:
        ckpt, train_values = (train_study(ctx, start, name, run_id)
                              if ctx.inputs.space.train_params and ctx.inputs.plan.train_trials > 1
                              else (train_once(ctx, start, name, run_id, {}, ctx.run_dir / "checkpoints" / name,
                                               extra=list(extra)), {}))
    except Exception as e:  # noqa: BLE001 - boundary: a failed w-phase keeps the weights, the search goes on
        cause = f"{type(e).__name__}: {e}"
        ctx.tracker.tags(run_id, {"error": cause[:5000]})
        ctx.log(f"{name}: GRPO failed, the checkpoint stays {start.checkpoint}: {cause[:300]}")
        ckpt, train_values = start.checkpoint, {}
    ledger.state.checkpoints.append(str(ckpt))
    ctx.tracker.tags(run_id, {"checkpoint": str(ckpt)})
    return {"checkpoint": str(ckpt), "train": train_values}


def train_spec(ctx: RunContext, values: dict[str, Any], steps: int | None = None, seed: int | None = None):
    """The w-phase's TrainSpec: the config's train options, the plan's steps, and a seed per generation
    (so a w-phase after a rejected one trains on fresh instances)."""
    from coevo.train.spec import spec_from_dict

    config = ctx.inputs.config
    data = {**config.train, "steps": steps or ctx.inputs.plan.grpo_steps, "report_to": "none",
            "seed": config.seed + ctx.ledger.generation if seed is None else seed}
    if (config.policy or {}).get("backend") == "vllm":  # the run's rollouts, training's included, on vLLM
        data["rollout_policy"] = {**config.vllm_defaults(), **config.policy}
    return spec_from_dict(data, f"{config.name}: train").with_overrides(values)


def train_once(ctx: RunContext, start: Pair, name: str, log_run: str, values: dict[str, Any], out,
               steps: int | None = None, seed: int | None = None, extra: list = ()) -> str:
    """One weights update (train.mode) from `start`'s checkpoint under its harness, on the train tasks plus
    `extra`; resumes a killed run in `out`. Its per-step metrics go to `log_run` (the phase run, or the
    trial's run)."""
    from coevo.harness.fingerprint import fingerprint
    from coevo.train.checkpoint import last_checkpoint
    from coevo.train.weights import train_weights

    spec = train_spec(ctx, values, steps, seed)
    harness = ctx.inputs.harness(start.overrides)
    tasks = [*ctx.inputs.train, *extra]
    what = (f"GRPO {spec.steps} steps x {spec.batch_size} episodes" if spec.mode == "rl" else
            f"{spec.mode}: harvest {spec.harvest_samples} episodes x {len(tasks)} tasks")
    ctx.log(f"{name}: {what} from {start.checkpoint} under {start.source}'s harness")
    ctx.tracker.params(log_run, {f"grpo.{k}": v for k, v in spec.model_dump(mode="json").items()})
    ctx.tracker.tags(log_run, {"harness_fingerprint": fingerprint(harness)})
    result = train_weights(start.checkpoint, harness, tasks, out, spec,
                           resume=last_checkpoint(out) is not None, backend=ctx.inputs.config.sandbox,
                           log=lambda m: ctx.log(f"{name}: {m}"))
    if result.summary:
        ctx.log(f"{name}: {result.summary}")
        ctx.ledger.state.trained[name] = result.summary
        ctx.tracker.text(log_run, result.summary + "\n", "trained.txt")
    _trace_harvest(ctx, log_run, Path(out), start.checkpoint, name)
    for record in result.metrics:
        step = int(record.get("step", 0))
        numbers = {k: v for k, v in record.items() if k != "step" and isinstance(v, int | float)}
        ctx.tracker.metrics(log_run, {f"grpo/{k}": v for k, v in numbers.items()}, step=step)
    return str(result.checkpoint)


def _trace_harvest(ctx: RunContext, run_id: str, out: Path, checkpoint: str, name: str) -> None:
    """A sample of the harvest's episodes (sft, auto) as traces of the run that trained on them, once."""
    from coevo.rollout import load_trajectories

    episodes, marker = out / "harvest.jsonl", out / "harvest.traced"
    if episodes.is_file() and not marker.exists():
        ctx.tracker.episodes(run_id, load_trajectories(episodes), ctx.inputs.config.traces, seed=ctx.inputs.config.seed,
                             tags={"run": f"{name} harvest", "phase": name, "role": "harvest",
                                   "checkpoint": Path(checkpoint).name})
        marker.touch()


def train_study(ctx: RunContext, start: Pair, name: str, run_id: str) -> tuple[str, dict]:
    """Several GRPO runs from `start` over the space's train.* keys; the best checkpoint on dev wins."""
    from coevo.search.study import optimize_until, phase_study, top_trials

    config, space = ctx.inputs.config, ctx.inputs.space
    study = phase_study(ctx, name, config.seed, ctx.inputs.plan.train_trials, prune=False)
    if not study.trials:  # the config's own options first: a known reference point
        defaults = train_spec(ctx, {})
        dumped = defaults.model_dump(mode="json")
        study.enqueue_trial({p.path: get_dotted(dumped, p.path.removeprefix("train.")) for p in space.train_params},
                            skip_if_exists=True)
    optimize_until(study, ctx.inputs.plan.train_trials, TrainObjective(ctx, start, name, run_id, study.study_name),
                   config.grace_period, wait_for_stale=ctx.resume)
    best = top_trials(study, 1)[0]
    return best.user_attrs["checkpoint"], {k.removeprefix("train."): v for k, v in best.params.items()}


class TrainObjective:
    """One GRPO run of the train study, scored as `start`'s harness on the checkpoint it trained."""

    def __init__(self, ctx: RunContext, start: Pair, name: str, run_id: str, study_name: str):
        self.ctx, self.start, self.name, self.run_id, self.study_name = ctx, start, name, run_id, study_name

    def __call__(self, trial) -> float:
        from coevo.search.space import split_overrides
        from coevo.search.study import retried_from

        ctx = self.ctx
        _, values = split_overrides(ctx.inputs.space.suggest(trial, ctx.inputs.space.train_params))
        number = retried_from(trial) or trial.number  # a retried run resumes the killed run's checkpoints
        label = f"{self.name} train #{trial.number}"
        out = ctx.run_dir / "checkpoints" / f"{self.name}-t{number}"
        trial_run = ctx.tracker.start(label, self.run_id, {"phase": self.name, "trial": trial.number,
                                                           "study": self.study_name})
        try:
            ckpt = train_once(ctx, self.start, self.name, trial_run, values, out)
            ctx.tracker.end(trial_run)
            pair, _ = ctx.evaluator.evaluate(f"{label} eval", self.run_id, self.start.overrides, ckpt,
                                             ctx.ledger.generation + 1, f"{self.name} train #{trial.number}",
                                             train=values)
        except Exception as e:  # noqa: BLE001 - boundary: a failed training run scores 0, the study goes on
            cause = f"{type(e).__name__}: {e}"
            trial.set_user_attr("error", cause[:2000])
            ctx.tracker.tags(trial_run, {"error": cause})
            ctx.tracker.end(trial_run, "FAILED")
            ctx.log(f"{label}: failed, scored 0: {cause[:300]}")
            return 0.0
        trial.set_user_attr("checkpoint", ckpt)
        return pair.score


def rescore_kept(ctx: RunContext, name: str, run_id: str) -> list[Pair]:
    """The incumbent and the pool on their own checkpoint, re-scored on the refreshed evolve set (each a
    resumable step); the same pairs (promotion scores stay valid), with new evolve scores and failures."""
    def rescored(old: Pair) -> Pair:
        pair, _ = ctx.evaluator.evaluate(f"{name} rescore {old.source}", run_id, old.overrides, old.checkpoint,
                                         old.generation, old.source, tags={"rescore": "1"})
        fresh = old.model_copy(update={k: getattr(pair, k) for k in (
            "score", "pass_at_1", "ci_low", "ci_high", "per_task", "mlflow_run", "failures")})
        ctx.log(f"{name}: re-scored {old.source} on the refreshed evolve set: {fresh.brief()}")
        return fresh

    kept = _distinct([ctx.incumbent.pair, *ctx.ledger.state.pool])
    return [ctx.ledger.memo_pair(f"kept {i}", lambda old=old: rescored(old)) for i, old in enumerate(kept)]


def _distinct(pairs: list[Pair]) -> list[Pair]:
    """`pairs` without repeats (by `Pair.key`), each where it first appears."""
    first: dict[str, Pair] = {}
    for pair in pairs:
        first.setdefault(pair.key, pair)
    return list(first.values())


def rescore(ctx: RunContext, name: str, run_id: str, train_values: dict) -> list[Pair]:
    """The incumbent's harness and the pool's, scored on the new checkpoint (each one a resumable step)."""
    ledger = ctx.ledger

    def rescored(old: Pair) -> Pair:
        origin = old.source.split(" on g")[0]
        pair, _ = ctx.evaluator.evaluate(f"{name} rescore {origin}", run_id, old.overrides, ledger.checkpoint,
                                         ledger.generation, f"{origin} on g{ledger.generation}",
                                         train=train_values, tags={"rescore": "1"})
        ctx.log(f"{name}: re-scored {origin} on g{ledger.generation}: dev pass@1 {pair.pass_at_1:.3f} "
                f"[{pair.ci_low:.3f}, {pair.ci_high:.3f}], objective {pair.score:.3f}")
        return pair

    # Distinct by harness: all of them go onto the new checkpoint.
    moved = _distinct([p.model_copy(update={"checkpoint": ledger.checkpoint})
                       for p in [ledger.state.incumbent, *ledger.state.pool]])
    return [ledger.memo_pair(f"rescore {i}", lambda old=old: rescored(old)) for i, old in enumerate(moved)]
