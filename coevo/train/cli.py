"""`coevo init-model` and `coevo warmstart`. Heavy libraries are imported inside the commands."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from coevo.sandbox.cli import BackendOption, ImageMapOption
from coevo.train.lora import lora_from_items
from coevo.train.sft import SFTSettings  # a dataclass; its module imports nothing heavy

# The options warmstart and train share: one model trained on one split under one harness, into a folder.
ModelFolder = Annotated[Path, typer.Option(help="HF model folder to train (from init-model; for train, "
                                           "usually from warmstart), or a model name (`coevo model list`).")]
HarnessFile = Annotated[Path, typer.Option(help="Harness YAML the episodes run under (as in eval).")]
RunFolder = Annotated[Path, typer.Option(help="Folder for the trained checkpoint (train adds checkpoints/, "
                                         "metrics.jsonl and rollouts/).")]
TaskFolder = Annotated[Path, typer.Option(help="Task folder (with splits).")]
SplitName = Annotated[str, typer.Option(help="Split to train on: train, dev, test or all.")]


def leave_process_group() -> None:
    """Under torchrun, leave the process group before the interpreter exits: a gloo group left to the exit
    path aborted a rank whose work was done ("terminate called without an active exception", exit -6)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)


def init_model(
    out: Annotated[Path, typer.Option(help="Folder to write the model and tokenizer to (HF format).")],
    tasks: Annotated[Path, typer.Option(help="Task folders the tokenizer learns its vocabulary from.")] = Path(
        "tasks"),
    prompts: Annotated[Path, typer.Option(help="Harness prompt templates, also in the vocabulary.")] = Path(
        "prompts"),
    harnesses: Annotated[Path, typer.Option(help="Harness YAMLs whose renderings shape the vocabulary.")] = Path(
        "harnesses"),
    seed: Annotated[int, typer.Option(help="Seed of the random initialisation.")] = 0,
    moe: Annotated[bool, typer.Option(help="A Mixture-of-Experts model (Qwen3-MoE, 8 experts, top-2) instead of "
                                      "the dense Qwen2: for `train.routing_replay`.")] = False,
) -> None:
    """Build the default tiny model here: a BPE tokenizer trained on the tasks and a fresh small Qwen2 (or
    Qwen3-MoE with --moe)."""
    from coevo.train.model import build_tiny_model, describe

    if not tasks.is_dir():
        fail(f"--tasks {tasks}: not a folder (expected task folders with instruction.md)")
    start = time.perf_counter()
    folder = build_tiny_model(out, tasks, seed=seed, prompts_dir=prompts if prompts.is_dir() else None,
                              harnesses_dir=harnesses if harnesses.is_dir() else None, moe=moe)
    print(f"wrote {describe(folder)} to {folder} in {time.perf_counter() - start:.1f}s")


def warmstart(
    model: ModelFolder, harness: HarnessFile, out: RunFolder,
    tasks: TaskFolder = Path("tasks"), split: SplitName = "train",
    epochs: Annotated[float, typer.Option(help="Passes over the conversations.")] = SFTSettings.epochs,
    lr: Annotated[float, typer.Option(help="Peak learning rate.")] = SFTSettings.lr,
    batch_size: Annotated[int, typer.Option(help="Conversations per optimizer step.")] = SFTSettings.batch_size,
    threads: Annotated[int, typer.Option(help="CPU threads for training; 0: all cores (1 is faster on a "
                                         "machine other jobs keep busy).")] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the data order, the oracle rollout and augmentation.")] = 0,
    augment: Annotated[int | None, typer.Option(help="Extra generated instances per family to train on (a suite "
                                                "from `coevo tasks generate` only; never dev/test instructions "
                                                "or held-out families). Default: 60 for such a suite, else 0.")
                       ] = None,
    lora: Annotated[list[str] | None, typer.Option(
        help="LoRA adapter setting FIELD=VALUE (YAML value), repeatable: rank (0: full weights, the default), "
             "alpha, dropout, target_modules, e.g. --lora rank=8 --lora 'target_modules=[q_proj, v_proj]'. "
             "The output stays a plain model folder (adapter merged; itself in adapter/).")] = None,
    backend: BackendOption = "local",
    image_map: ImageMapOption = None,
) -> None:
    """Supervised warm start: oracle episodes through the harness, then TRL SFT on the assistant turns."""
    from coevo.errors import CoevoError
    from coevo.sandbox.cli import image_map_from
    from coevo.train.warmstart import run_warmstart

    try:
        settings = SFTSettings(epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, threads=threads or None,
                               lora=lora_from_items(lora or [], "--lora"))
        from coevo.models import resolve_model

        report = run_warmstart(resolve_model(model), harness, tasks, split, out, settings, augment=augment,
                               backend=backend, image_map=image_map_from(image_map))
    except (CoevoError, ValueError) as e:
        fail(str(e))
    print(report)


def train(
    model: ModelFolder, harness: HarnessFile, out: RunFolder,
    tasks: TaskFolder = Path("tasks"), split: SplitName = "train",
    steps: Annotated[int | None, typer.Option(help="Total optimizer steps (spec: steps).")] = None,
    group_size: Annotated[int | None, typer.Option(help="Episodes per task per step (spec: group_size).")
                          ] = None,
    tasks_per_step: Annotated[int | None, typer.Option(help="Tasks per step (spec: tasks_per_step).")] = None,
    lr: Annotated[float | None, typer.Option(help="Learning rate (spec: learning_rate).")] = None,
    reward: Annotated[str | None, typer.Option(help="binary or partial (spec: reward).")] = None,
    rollout_dtype: Annotated[str | None, typer.Option(help="fp32 or bf16 (spec: rollout_dtype).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (spec: seed).")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML mapping of training spec fields.")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="FIELD=VALUE (YAML value), repeatable, e.g. --set beta=0.01 --set mismatch.action=halt "
                      "--set trl.top_entropy_quantile=0.2. Fields: see TrainSpec (coevo/train/train_spec.py).")
    ] = None,
    max_tasks: Annotated[int | None, typer.Option(help="Train on the first N tasks of the split only.")
                         ] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out from its newest checkpoint.")
                      ] = False,
    backend: BackendOption = "local",
    image_map: ImageMapOption = None,
) -> None:
    """GRPO (TRL) on multi-turn episodes under a harness, rewards from the task verifiers."""
    import yaml

    from coevo.config import read_yaml
    from coevo.errors import CoevoError
    from coevo.harness import load_harness
    from coevo.sandbox.cli import checked_backends, image_map_from
    from coevo.tasks import load_taskset
    from coevo.train.spec import TrainSpec, spec_from_dict

    try:
        data = read_yaml(config, "training spec", CoevoError) if config else {}
        if not isinstance(data, dict):
            fail(f"--config {config}: expected a YAML mapping of training spec fields")
        spec = spec_from_dict(data, source=str(config or "training spec"))
        flags = {"steps": steps, "group_size": group_size, "tasks_per_step": tasks_per_step,
                 "learning_rate": lr, "reward": reward, "rollout_dtype": rollout_dtype, "seed": seed}
        spec = spec.with_overrides({k: v for k, v in flags.items() if v is not None})
        for item in set_ or []:
            key, sep, value = item.partition("=")
            if not sep:
                fields = ", ".join(TrainSpec.model_fields)
                fail(f"--set {item!r}: expected FIELD=VALUE (fields: {fields})")
            try:  # one at a time, so the error names the --set that caused it
                spec = spec.with_overrides({key.strip(): yaml.safe_load(value)})
            except (CoevoError, ValueError) as e:
                fail(f"--set {item!r}: {e}")
        task_list = load_taskset(tasks).split(split)[:max_tasks]
        checked_backends(task_list, backend)
        loaded = load_harness(harness)
        from coevo.models import resolve_model
        from coevo.train.grpo import train_grpo

        result = train_grpo(resolve_model(model), loaded, task_list, out, spec, resume=resume,
                            backend=backend, image_map=image_map_from(image_map))
    except (CoevoError, ValueError, OSError) as e:
        fail(str(e))
    finally:
        leave_process_group()
    last = result.metrics[-1] if result.metrics else {}
    print(f"{result.steps} steps (resumed from {result.resumed_from}); last step: reward "
          f"{last.get('reward/mean', float('nan')):.3f}, pass {last.get('pass_rate', float('nan')):.3f}; "
          f"checkpoint {result.checkpoint}")
