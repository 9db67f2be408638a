"""The inner loop (w-phase): TRL `GRPOTrainer`, not subclassed, with our rollout engine as its `rollout_func`.

    train_grpo(model_dir, harness, tasks, out_dir, spec, resume) -> TrainResult

One step = `spec.tasks_per_step` tasks x `spec.group_size` episodes rolled out under the harness, one
optimizer step (gradients accumulate over micro-batches). Where this departs from plain TRL GRPO:
- the rollouts are multi-turn episodes in sandboxes; environment tokens are masked (`env_mask`), and the
  harness's recovery and context policies run exactly as in evaluation (one code path);
- a separate rollout copy of the model (fp32 or bf16) gets the trainer's weights each step, like a
  generation server; we measure the train/rollout mismatch ourselves (TRL only corrects it with vLLM);
- checkpoints are published atomically (coevo.train.checkpoint) and `resume` continues a killed run.

MLflow: TRL's MLflowCallback logs params and every step's metrics (coevo.train.grpo_mlflow: into which run).

This module imports torch and TRL only inside functions: importing it is cheap.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from coevo.logs import library_bars_off
from coevo.train import grpo_mlflow
from coevo.train.spec import MismatchSpec, TrainSpec, spec_from_dict

__all__ = ["MismatchSpec", "TrainResult", "TrainSpec", "spec_from_dict", "train_grpo"]

METRICS_FILE = "metrics.jsonl"

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    checkpoint: Path
    """The newest complete checkpoint: a HF model folder (with tokenizer) that HFPolicy loads."""
    run_dir: Path
    steps: int
    """Optimizer steps the run has finished (over all resumptions)."""
    resumed_from: int = 0
    """The step this call resumed from (0: a fresh run)."""
    metrics: list[dict] = field(default_factory=list)
    """One record per step: TRL's logged metrics (loss, reward, kl, ...) and ours (pass_rate, mismatch/*,
    drift/*, tokens/*, groups/*, time/*), over all resumptions."""
    summary: str = ""
    """What the update trained on and what it dropped, in words (coevo.train.weights fills it)."""


@library_bars_off()
def train_grpo(model_dir: Path, harness, tasks: list, out_dir: Path, spec: TrainSpec, resume: bool = False,
               backend: str = "local", image_map: dict[str, str] | None = None) -> TrainResult:
    """Train `model_dir` with GRPO on `tasks` under `harness`; checkpoints and metrics go to `out_dir`.
    Episodes run in `backend`'s sandboxes (local, docker or auto; see coevo.sandbox.make_sandbox).
    `model_dir` may be a LoRA adapter folder (a nested trial's SFT adapter): that adapter trains on, over
    its base, and `spec.lora` must have rank > 0."""
    from safetensors import SafetensorError

    from coevo.train import checkpoint as ckpt
    from coevo.train.progress import show_progress

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    out_dir, model_dir = Path(out_dir), Path(model_dir)
    start = _start_point(out_dir, resume)
    if start:
        from coevo.train.lora import check_resume

        check_resume(start, spec.lora, model_dir, ckpt.MARKER)
    resumed_from = ckpt.step_of(start) if start else 0
    if resumed_from >= spec.steps:
        log.info(f"{out_dir}: already at step {resumed_from} of {spec.steps}; nothing to train")
        return _result(out_dir, start, resumed_from)
    if len(tasks) < spec.tasks_per_step:
        raise ValueError(f"train_grpo: {len(tasks)} tasks cannot fill a step of tasks_per_step="
                         f"{spec.tasks_per_step}; give more tasks or lower tasks_per_step")
    harness = training_harness(harness, spec)
    _record_run(out_dir, model_dir, harness, tasks, spec, resumed_from)
    trainer = _make_trainer(model_dir, harness, tasks, out_dir, spec, (backend, image_map))
    caller_run = grpo_mlflow.active_run_id()
    log.info(f"GRPO: {len(trainer.train_dataset)} tasks, {spec.tasks_per_step} x {spec.group_size} "
             f"episodes per step, steps {resumed_from + 1}..{spec.steps}, rollout {spec.rollout_dtype}, "
             f"harness {harness.name}" + (f", resuming from {start}" if start else ""))
    failed, bar = True, show_progress(trainer, "GRPO")
    try:
        trainer.train(resume_from_checkpoint=str(start) if start else None)
        failed = False
    except SafetensorError as e:  # the Trainer writing weights (a full disk): an OSError to the callers
        raise OSError(f"{out_dir / ckpt.STAGING}: writing a checkpoint failed ({e}); the published checkpoints "
                      "are whole: make room and continue with --resume") from e
    finally:
        bar.close()
        if trainer.is_world_process_zero():  # rank 0 may still be publishing when another rank gets here
            ckpt.clear_staging(out_dir)
        if "mlflow" in trainer.args.report_to:
            grpo_mlflow.close(trainer, caller_run, failed)
    return _result(out_dir, ckpt.last_checkpoint(out_dir), trainer.state.global_step, resumed_from)


def _start_point(out_dir: Path, resume: bool) -> Path | None:
    from coevo.train import checkpoint as ckpt

    if int(os.environ.get("RANK", "0")) == 0:  # under torchrun only rank 0 writes the run folder
        ckpt.clear_staging(out_dir)
    last = ckpt.last_checkpoint(out_dir)
    if last is not None and not resume:
        raise ValueError(f"{out_dir}: holds checkpoints (newest {last.name}); pass resume=True (--resume) to "
                         "continue that run, or choose a new output folder")
    _truncate_metrics(out_dir, ckpt.step_of(last) if last else 0)
    return last


def training_harness(harness, spec: TrainSpec):
    if spec.temperature is not None:
        harness = harness.with_overrides({"decoding.temperature": spec.temperature})
    if harness.decoding.temperature <= 0:
        raise ValueError(f"harness '{harness.name}': decoding.temperature is 0 (greedy); GRPO samples: "
                         "set train.temperature > 0 or the harness's decoding.temperature")
    return harness


def _make_trainer(model_dir: Path, harness, tasks: list, out_dir: Path, spec: TrainSpec,
                  sandboxes: tuple[str, dict[str, str] | None] = ("local", None)):

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from coevo.train import lora
    from coevo.train.checkpoint import AtomicCheckpoints
    from coevo.train.grpo_log import StepLog, TimeBudget
    from coevo.train.grpo_rollout import GRPORollout, rollout_policy
    from coevo.train.routing import attach as attach_routing

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    if lora.is_adapter(model_dir):  # a nested trial's SFT adapter (coevo/search/inner.py): GRPO trains it on
        if not spec.lora.enabled:
            raise ValueError(f"{model_dir} is a LoRA adapter: GRPO goes on training it only with lora.rank > 0")
        model = lora.load_adapted(model_dir, trainable=True)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        if spec.lora.enabled:
            model = lora.wrap(model, spec.lora, "training spec", seed=spec.seed)
    # MoE only: replayed or watched rollout routing (hooks on the base model's routers, under LoRA too)
    routing = attach_routing(model.get_base_model() if lora.is_peft(model) else model, spec.routing_replay)
    policy = rollout_policy(model_dir, spec, out_dir, device)
    if spec.screen_samples:
        tasks = _screened(tasks, harness, policy, spec, out_dir, sandboxes)
    if spec.fresh_instances:
        from coevo.train.fresh import fresh_instances

        tasks = fresh_instances(tasks, spec.steps * spec.tasks_per_step, out_dir / "fresh_tasks", spec.seed)
        log.info(f"fresh instances: {len(tasks)} of {len({t.family for t in tasks})} families, each used "
                 "at most once")
    bridge = GRPORollout(tasks, harness, policy, spec, out_dir, sandboxes=sandboxes, routing=routing)
    step_log = StepLog(bridge, out_dir / METRICS_FILE, spec.steps)
    budget = [TimeBudget(spec.max_minutes)] if spec.max_minutes else []
    args = grpo_config(spec, harness, out_dir, device)
    trainer = GRPOTrainer(
        model=model, reward_funcs=[bridge.reward_func()], args=args,
        train_dataset=Dataset.from_list([{"prompt": t.name} for t in tasks]), processing_class=tokenizer,
        rollout_func=bridge, callbacks=[step_log, *budget], optimizers=(_optimizer(model, spec, args), None),
    )
    # Order matters: StepLog adds time/train to the logs before the reporters see them, and checkpoints
    # are published (moved out of .staging) only after every other on_save has run.
    for cb in [c for c in trainer.callback_handler.callbacks if type(c).__module__.startswith(
            "transformers.integrations")]:
        trainer.remove_callback(cb)
        trainer.add_callback(cb)
    if spec.lora.enabled:
        # The Trainer saves only the adapter: merge it into a plain model folder before publishing; a resume
        # reloads the adapter from there (the Trainer would look for it at the folder's top).
        trainer.add_callback(lora.adapter_callback())
        trainer._load_from_checkpoint = lambda checkpoint, model=None: lora.load_adapter(model or trainer.model,
                                                                                         checkpoint)
    info = {"base_model": str(model_dir), "harness": harness.name, "spec": spec.model_dump(mode="json")}
    trainer.add_callback(AtomicCheckpoints(out_dir, spec.keep_checkpoints, info))
    return trainer


def _optimizer(model, spec: TrainSpec, args):
    """The optimizer the Trainer would build from `args`, with one parameter group per `spec.lr_multipliers`
    pattern; None (the Trainer builds its own) without multipliers."""
    from fnmatch import fnmatchcase

    from transformers import Trainer

    if not spec.lr_multipliers:
        return None
    groups = {pattern: [] for pattern in [*spec.lr_multipliers, None]}
    for name, param in ((n, p) for n, p in model.named_parameters() if p.requires_grad):  # LoRA: adapters only
        groups[next((p for p in spec.lr_multipliers if fnmatchcase(name, p)), None)].append(param)
    unmatched = [p for p in spec.lr_multipliers if not groups[p]]
    if unmatched:
        names = [n for n, p in model.named_parameters() if p.requires_grad]
        raise ValueError(f"training spec: lr_multipliers: {unmatched} match no parameter (names look like "
                         f"{names[0]!r}, {names[-1]!r})")
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    return cls([{"params": params, "lr": kwargs["lr"] * spec.lr_multipliers.get(p, 1.0),
                 "weight_decay": args.weight_decay} for p, params in groups.items() if params], **kwargs)


def _screened(tasks: list, harness, policy, spec: TrainSpec, out_dir: Path,
              sandboxes: tuple[str, dict | None]) -> list:
    """The tasks to train on: screened once per run (a resumed run reuses its screen), on the run's
    sandbox backend."""
    from coevo.train import screen

    names = {t.name for t in tasks}
    done = screen.load(out_dir)
    if done is None or not set(done.kept) <= names:
        done = screen.screen(tasks, harness, policy, spec.screen_samples, spec.reward, spec.seed,
                             at_least=spec.tasks_per_step, sandboxes=sandboxes)
        screen.save(done, out_dir)
    log.info(screen.describe(done, len(tasks)))
    kept = set(done.kept)
    return [t for t in tasks if t.name in kept]


def grpo_config(spec: TrainSpec, harness, out_dir: Path, device: str = "cpu"):
    """TRL's GRPOConfig for a spec: one generation batch and one optimizer step per step."""
    import dataclasses

    from trl import GRPOConfig

    from coevo.train.checkpoint import STAGING
    from coevo.train.spec import TRL_FIELDS

    micro = spec.micro_batch_size or spec.batch_size
    unknown = set(spec.trl) - {f.name for f in dataclasses.fields(GRPOConfig)}
    if unknown:
        raise ValueError(f"training spec: trl: {sorted(unknown)} are not TRL GRPOConfig options")
    options = {
        "output_dir": str(out_dir / STAGING), "max_steps": spec.steps, "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": spec.batch_size // micro, "num_generations": spec.group_size,
        **{name: getattr(spec, name) for name in TRL_FIELDS},
        "temperature": harness.decoding.temperature, "top_p": harness.decoding.top_p,
        # Only dr_grpo's normaliser reads it: the longest buffer an episode can reach.
        "max_completion_length": harness.episode_token_bound(),
        "seed": spec.seed, "use_cpu": device == "cpu", "bf16": False, "fp16": False,
        "activation_checkpointing": False,
        "save_strategy": "steps", "save_steps": spec.save_steps, "save_total_limit": None, "logging_steps": 1,
        "report_to": grpo_mlflow.report_to(spec), "run_name": f"grpo-{out_dir.name}", "disable_tqdm": True,
        "dataloader_num_workers": 0,
        "log_completions": False,
    }
    return GRPOConfig(**{**options, **spec.trl})


def _record_run(out_dir: Path, model_dir: Path, harness, tasks: list, spec: TrainSpec,
                resumed_from: int) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "harness.yaml").write_text(harness.to_yaml())
    run = {"base_model": str(model_dir), "harness": harness.name, "tasks": [t.name for t in tasks],
           "spec": spec.model_dump(mode="json"), "resumed_from": resumed_from}
    (out_dir / "run.json").write_text(json.dumps(run, indent=1) + "\n")


def _truncate_metrics(out_dir: Path, step: int) -> None:
    """Forget logged steps after `step` (a killed run logged them, but its checkpoint did not keep them)."""
    path = out_dir / METRICS_FILE
    if path.exists():
        kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
        path.write_text("".join(line + "\n" for line in kept))


def _result(out_dir: Path, checkpoint: Path | None, steps: int,
            resumed_from: int | None = None) -> TrainResult:
    path = out_dir / METRICS_FILE
    metrics = [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []
    if checkpoint is None:
        raise RuntimeError(f"{out_dir}: training ended without a checkpoint")
    return TrainResult(checkpoint, out_dir, steps, steps if resumed_from is None else resumed_from, metrics)
