"""The inner loop of a nested trial (coevo/search/nested.py) and of the weights-only arm's trainings: a LoRA
adapter trained from a start checkpoint under one harness.

    train_adapter(ctx, start, overrides, train, folder) -> (folder/adapter, what it was trained on)

1. SFT. Token rows rendered under the harness (`training_rows`): the train tasks' oracle episodes that the
   verifier passes, plus the start model's own verified successes when `train.mode` is sft or auto. A fresh
   adapter (`train.lora`, rank 8 when the config trains full weights) learns them by LoRA SFT.
2. GRPO, when `plan.inner_grpo_steps` > 0. A nested trial first scores the SFT adapter on the first
   evolve batch and reports it to Optuna's pruner as inner step 0 (`after_sft`): a pair the pruner stops
   there costs one batch instead of its GRPO steps. Then the same adapter goes on learning by GRPO
   (coevo.train.grpo) under the same harness, on the train tasks, from its own sampled episodes.
   SFT teaches the harness's format from demonstrations. GRPO then reinforces what the adapted model
   itself gets right under that harness, so that a harness is scored on weights that practised it.
   Batch shape, loss, reward, screen and mismatch watch are the config's `train.*` fields, as in a w-phase.
   Groups without signal are dropped under `train.drop_no_signal_groups`.

The trial's folder (adapters/<phase>-t<k>, or -w<n> for a worker, arm-weights-<i> for the weights arm):

    values.json   the trial's values, written first (a folder begun for other values is emptied)
    data/         the episodes SFT was trained on
    sft/          the SFT adapter when GRPO follows (else SFT publishes straight into adapter/)
    grpo/         train_grpo's run folder: metrics.jsonl, harness.yaml, checkpoints/ until adapter/ is published
    nested.json   the harness fingerprint it was trained under, its values, data counts and GRPO summary
    adapter/      the trial's weights (peft's folder over the start checkpoint), published last, by rename

A kill resumes where it stopped: a published sft/ is reused, a GRPO run continues from its last
checkpoint, and a published adapter/ is the whole trial's training.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coevo.search.config import LORA_RANK
from coevo.search.context import RunContext
from coevo.search.state import Pair

ARTIFACT_BYTES = 20 << 20
"""An adapter folder up to this size is also logged to MLflow as an artifact of its trial."""


def train_adapter(ctx: RunContext, start: Pair, overrides: dict[str, Any], train: dict[str, Any], folder: Path,
                  seed: int | None = None, after_sft: Callable[[Path], None] | None = None) -> tuple[Path, dict]:
    """A LoRA adapter trained from `start`'s checkpoint under the harness of `overrides`, in folder/adapter
    (reused when already published for the same overrides and train values); returns it and what it was
    trained on (folder/nested.json). When GRPO steps follow SFT, `after_sft` is given the SFT adapter
    first: the nested trial's inner pruning point, which may stop the trial before its GRPO steps."""
    from coevo.harness.fingerprint import fingerprint
    from coevo.search.weights import train_spec
    from coevo.train.lora import LoraSpec

    adapter, record = folder / "adapter", folder / "nested.json"
    claim(folder, {"overrides": overrides, "train": train})
    if (adapter / "adapter_config.json").is_file() and record.is_file():
        return adapter, json.loads(record.read_text())
    spec = train_spec(ctx, train, seed=seed)
    lora = spec.lora if spec.lora.enabled else LoraSpec(rank=LORA_RANK)
    spec = spec.model_copy(update={"lora": lora})
    harness = ctx.inputs.harness(overrides)
    steps = ctx.inputs.plan.inner_grpo_steps or 0
    sft = folder / "sft" if steps else adapter
    numbers = sft_adapter(ctx, start, harness, spec, folder, sft)
    if steps and after_sft is not None:
        after_sft(sft)
    info = {"harness_fingerprint": fingerprint(harness), "overrides": overrides, "train": train,
            "base": start.checkpoint, "seed": spec.seed, "lora": lora.model_dump(), **numbers}
    if steps:
        info.update(grpo_adapter(ctx, sft, harness, spec.model_copy(update={"steps": steps}), folder / "grpo",
                                 adapter))
    record.write_text(json.dumps(info, indent=1) + "\n")
    if steps:
        publish(folder / "grpo", adapter)
    return adapter, info


def sft_adapter(ctx: RunContext, start: Pair, harness, spec, folder: Path, out: Path) -> dict:
    """LoRA SFT from `start` on rows rendered under `harness`, published into `out` (reused when there);
    returns the data counts (kept in folder/sft.json beside a published SFT adapter)."""
    from coevo.train.sft import SFTSettings, train_sft

    counts = folder / "sft.json"
    if (out / "adapter_config.json").is_file() and counts.is_file():
        return json.loads(counts.read_text())
    rows, numbers = training_rows(ctx, start.checkpoint, harness, spec, folder / "data")
    staging = out.with_name(f"{out.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    train_sft(Path(start.checkpoint), rows, staging, SFTSettings(
        epochs=spec.sft_epochs, lr=spec.sft_learning_rate, batch_size=spec.sft_batch_size, seed=spec.seed,
        warmup_ratio=0.0, lora=spec.lora),
        source=f"nested trial under {harness.name}", merged=False)
    counts.write_text(json.dumps(numbers))
    staging.rename(out)  # a kill before this leaves only the staging folder: trained again on retry
    return numbers


def grpo_adapter(ctx: RunContext, sft: Path, harness, spec, out: Path, adapter: Path) -> dict:
    """GRPO steps on the SFT adapter under `harness` (resumed from out's last checkpoint); what they did."""
    from coevo.train.checkpoint import last_checkpoint
    from coevo.train.grpo import train_grpo
    from coevo.train.weights import grpo_summary

    result = grpo_summary(train_grpo(sft, harness, ctx.inputs.train, out, spec,
                                     resume=last_checkpoint(out) is not None, backend=ctx.inputs.config.sandbox),
                          spec, len(ctx.inputs.train))
    rewards = [m["reward"] for m in result.metrics if "reward" in m]
    done = {"grpo_steps": result.steps, "grpo_summary": result.summary,
            "grpo_reward_first": rewards[0] if rewards else None, "grpo_reward_last": rewards[-1] if rewards else None}
    staging = adapter.with_name("adapter.staging")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(result.checkpoint / "adapter", staging)
    return done


def publish(grpo: Path, adapter: Path) -> None:
    """The GRPO run's last adapter becomes the trial's (by rename); its checkpoints, each a merged copy of
    the whole model, are removed (metrics.jsonl stays)."""
    from coevo.train.checkpoint import CHECKPOINTS

    adapter.with_name("adapter.staging").rename(adapter)
    shutil.rmtree(grpo / CHECKPOINTS, ignore_errors=True)


def claim(folder: Path, values: dict[str, Any]) -> None:
    """Keep what `folder` holds (episodes, adapter) only when it was begun for these values, else empty it: a
    resumed owner's slot can come back with other values when a worker took the killed trial's retry."""
    mark, values = folder / "values.json", json.loads(json.dumps(values))
    try:
        if json.loads(mark.read_text()) == values:
            return
    except (OSError, ValueError):  # absent, or torn by a kill
        pass
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    mark.with_suffix(".tmp").write_text(json.dumps(values))
    mark.with_suffix(".tmp").replace(mark)


def training_rows(ctx: RunContext, model: str, harness, spec, out: Path) -> tuple[list[dict], dict]:
    """Token rows rendered under `harness`: the model's own verified successes (sft and auto modes) and the
    train tasks' oracle episodes that pass; both sets of episodes are kept in `out` for a resumed trial."""
    from coevo.train.harvest import Harvest
    from coevo.train.replay import replay
    from coevo.train.weights import sample_harvest

    tasks, backend = ctx.inputs.train, ctx.inputs.config.sandbox
    out.mkdir(parents=True, exist_ok=True)
    own = sample_harvest(Path(model), harness, tasks, spec, out, backend, None) if spec.mode != "rl" else Harvest()
    demos = replay(Path(model), harness, tasks, own.never, len(own.rows), spec.replay_ratio, out, spec.seed,
                   backend, None, spec.replay_min or len(tasks))
    rows = [*own.rows, *demos.rows]
    if not rows:
        raise ValueError(f"no training data under {harness.name}: no own verified success, and none of "
                         f"{len(demos.left_out)} oracle episodes passed under this harness")
    return rows, {"own_examples": len(own.rows), "oracle_examples": len(demos.rows),
                  "oracle_left_out": len(demos.left_out)}


def record_training(ctx: RunContext, trial_run: str, adapter: Path, info: dict) -> None:
    """The trial's training in MLflow: params, the fingerprint it was trained under, the adapter's path
    (and the adapter itself when small), its data counts, and its GRPO steps' metrics."""
    ctx.tracker.params(trial_run, {**info["overrides"], **{f"train.{k}": v for k, v in info["train"].items()},
                                   "lora.rank": info["lora"]["rank"], "base": info["base"], "seed": info["seed"]})
    ctx.tracker.tags(trial_run, {"harness_fingerprint": info["harness_fingerprint"], "adapter": str(adapter),
                                 **({"grpo": info["grpo_summary"]} if "grpo_summary" in info else {})})
    ctx.tracker.metrics(trial_run, {k: info[k] for k in ("own_examples", "oracle_examples", "oracle_left_out")})
    metrics = adapter.parent / "grpo" / "metrics.jsonl"
    for line in metrics.read_text().splitlines() if metrics.is_file() else []:
        record = json.loads(line)
        numbers = {f"grpo/{k}": v for k, v in record.items() if k != "step" and isinstance(v, int | float)}
        ctx.tracker.metrics(trial_run, numbers, step=int(record.get("step", 0)))
    if sum(f.stat().st_size for f in adapter.rglob("*") if f.is_file()) <= ARTIFACT_BYTES:
        ctx.tracker.folder(trial_run, adapter, "adapter")
