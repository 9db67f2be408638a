"""One weights update, in the mode the spec names (`train.mode`):

    rl     GRPO (coevo.train.grpo) on the tasks given, screened as the spec says
    sft    self-SFT: harvest k episodes per task under the harness, fine-tune on the verified successes
           (coevo.train.harvest), token in / token out, mixed with `replay_ratio` oracle demonstrations
           per own example (coevo.train.replay)
    auto   harvest first; GRPO on the frontier (tasks whose episodes disagree) when it holds at least
           `min_frontier` tasks, else self-SFT on the same harvest: the weights channel always has a signal
           as long as the model solves something

Every mode writes a HF checkpoint folder and returns a TrainResult; `TrainResult.metrics` says what it
trained on and what it dropped, and why.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from coevo.train.grpo import TrainResult, train_grpo
from coevo.train.harvest import Harvest, harvest, save
from coevo.train.replay import Replay, replay
from coevo.train.spec import TrainSpec


def train_weights(model_dir: Path, harness, tasks: list, out: Path, spec: TrainSpec, resume: bool = False,
                  backend: str = "local", image_map: dict[str, str] | None = None, log=None) -> TrainResult:
    """Update `model_dir` under `harness` on `tasks` by `spec.mode`; the checkpoint goes under `out`."""
    out, log = Path(out), log or logging.getLogger(__name__).info
    if spec.mode == "rl":
        return grpo_summary(train_grpo(model_dir, harness, tasks, out, spec, resume=resume, backend=backend,
                                       image_map=image_map), spec, len(tasks))
    done = out / "sft"
    if (done / "config.json").is_file():  # a finished self-SFT: nothing to redo on resume
        result = TrainResult(done, out, 1, metrics=[{"step": 1, "mode_sft": 1.0}])
        result.summary = f"{spec.mode}: self-SFT (finished before a resume)"
        return result
    h = sample_harvest(model_dir, harness, tasks, spec, out, backend, image_map)
    log(h.describe())
    frontier = [t for t in tasks if t.name in set(h.frontier)]
    if spec.mode == "auto" and len(frontier) >= (spec.min_frontier or spec.tasks_per_step):
        log(f"auto: {len(frontier)} frontier tasks -> GRPO on them")
        from coevo.train.checkpoint import last_checkpoint

        result = train_grpo(model_dir, harness, frontier, out / "rl", spec.with_overrides({"screen_samples": 0}),
                            resume=last_checkpoint(out / "rl") is not None, backend=backend, image_map=image_map)
        result.metrics = [{**m, "mode_sft": 0.0, **h.summary()} for m in result.metrics]
        return grpo_summary(result, spec, len(frontier), f"auto, {h.describe()}: ")
    if not h.rows and not spec.replay_min:
        raise ValueError(f"self-SFT: no verified success to train on among {h.episodes} episodes under "
                         f"{harness.name} ({len(tasks)} tasks x {spec.harvest_samples}); the weights stay")
    mixed = replayed(model_dir, harness, tasks, h, spec, out, backend, image_map)
    if not h.rows and not mixed.rows:
        raise ValueError(f"self-SFT: no verified success among {h.episodes} episodes and no oracle demonstration "
                         f"passed under {harness.name} ({len(tasks)} tasks); the weights stay")
    log(f"{spec.mode}: self-SFT on {len(h.rows)} own examples + {len(mixed.rows)} replayed oracle demonstrations"
        + (f" ({len(frontier)} frontier tasks < {spec.min_frontier or spec.tasks_per_step})"
           if spec.mode == "auto" else ""))
    self_sft(model_dir, h, done, spec, extra=mixed.rows)
    result = TrainResult(done, out, 1, metrics=[{"step": 1, "mode_sft": 1.0, **h.summary(), **mixed.summary()}])
    result.summary = f"{spec.mode}: self-SFT, {h.describe()}; {describe_replay(mixed, spec)}"
    return result


def replayed(model_dir: Path, harness, tasks: list, h: Harvest, spec: TrainSpec, out: Path, backend: str,
             image_map: dict[str, str] | None) -> Replay:
    """The oracle demonstrations mixed into self-SFT (coevo.train.replay); none at replay_ratio 0."""
    from coevo.train.grpo import training_harness

    if not spec.replay_ratio and not spec.replay_min:
        return Replay()
    return replay(model_dir, training_harness(harness, spec), tasks, h.never, len(h.rows), spec.replay_ratio, out,
                  spec.seed, backend, image_map, spec.replay_min)


def describe_replay(r: Replay, spec: TrainSpec) -> str:
    if not spec.replay_ratio and not spec.replay_min:
        return "no oracle replay"
    missing = f", {len(r.left_out)} demonstrations did not pass and were left out" if r.left_out else ""
    return (f"oracle replay: {len(r.rows)} demonstrations (replay_ratio {spec.replay_ratio:g}, replay_min "
            f"{spec.replay_min} asked for {r.asked}){missing}")


def grpo_summary(result: TrainResult, spec: TrainSpec, tasks: int, prefix: str = "") -> TrainResult:
    """A GRPO run in words: groups trained on, and those without signal (dropped when the spec says so)."""
    groups = result.steps * spec.tasks_per_step
    flat = int(sum(m.get("groups/no_signal", 0) for m in result.metrics))
    fate = "dropped" if spec.drop_no_signal_groups else "kept, with zero advantage"
    result.summary = (f"{prefix}GRPO on {tasks} tasks, {result.steps} steps: {groups - flat} groups trained on, "
                      f"{flat} without signal ({fate})")
    return result


def sample_harvest(model_dir: Path, harness, tasks: list, spec: TrainSpec, out: Path, backend: str,
                   image_map: dict[str, str] | None) -> Harvest:
    """k = `spec.harvest_samples` episodes per task at the training temperature, sorted (see harvest). The
    episodes are kept in out/harvest.jsonl: a resumed run sorts them again rather than sampling anew."""
    from coevo.harness.fingerprint import fingerprint
    from coevo.rollout import load_trajectories, rollout, save_trajectories
    from coevo.train.grpo import training_harness
    from coevo.train.grpo_rollout import reward_of, rollout_policy

    harness = training_harness(harness, spec)
    episodes = out / "harvest.jsonl"
    if episodes.is_file():
        trajectories = load_trajectories(episodes)
    else:
        trajectories = rollout(tasks, harness, rollout_policy(model_dir, spec, out), n_per_task=spec.harvest_samples,
                               seed=spec.seed, backend=backend, image_map=image_map)
        out.mkdir(parents=True, exist_ok=True)
        save_trajectories(episodes.with_suffix(".staging"), trajectories).rename(episodes)
    h = harvest(trajectories, fingerprint(harness), lambda t: reward_of(t, spec.reward), spec.gap_weight)
    save(h, out)
    return h


def self_sft(model_dir: Path, h: Harvest, done: Path, spec: TrainSpec, extra: list[dict] = ()) -> None:
    """Fine-tune on the harvest's token rows plus `extra` (replayed demonstrations); published by rename, so a
    killed run redoes it whole."""
    from coevo.train.sft import SFTSettings, train_sft

    staging = done.with_name("sft.staging")
    shutil.rmtree(staging, ignore_errors=True)
    settings = SFTSettings(epochs=spec.sft_epochs, lr=spec.sft_learning_rate, batch_size=spec.sft_batch_size,
                           seed=spec.seed, warmup_ratio=0.0, lora=spec.lora)
    train_sft(model_dir, [*h.rows, *extra], staging, settings, source="self-SFT")
    for junk in staging.glob("checkpoint-*"):
        shutil.rmtree(junk, ignore_errors=True)
    staging.rename(done)
