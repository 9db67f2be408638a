"""Atomic checkpoints for a GRPO run, on top of transformers' own checkpoint format.

The Trainer writes `checkpoint-N` (model, tokenizer, optimizer, scheduler, RNG states, trainer_state.json)
into RUN_DIR/.staging, not atomically. Once it is complete, `AtomicCheckpoints.on_save` flushes it to disk
and renames it into RUN_DIR/checkpoints/ (one `rename`, atomic on one filesystem). So:
- a run killed at any moment (kill -9) leaves every folder in checkpoints/ complete; a half-written one can
  only be in .staging, which the next start clears;
- older checkpoints are deleted only after a newer one is in place, and the newest is never deleted;
- `--resume` hands the newest to `Trainer.train(resume_from_checkpoint=...)`, which restores the step
  count, optimizer, scheduler and RNG states.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from transformers import TrainerCallback

STAGING = ".staging"
CHECKPOINTS = "checkpoints"
MARKER = "coevo_checkpoint.json"
"""Written into each checkpoint before it is published: the step and the run's settings."""
_NAME = re.compile(r"^checkpoint-(\d+)$")


def checkpoints(run_dir: Path) -> list[Path]:
    """The run's complete checkpoints, oldest first (by step)."""
    folder = Path(run_dir) / CHECKPOINTS
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found)]


def last_checkpoint(run_dir: Path) -> Path | None:
    found = checkpoints(run_dir)
    return found[-1] if found else None


def step_of(checkpoint: Path) -> int:
    return int(_NAME.match(checkpoint.name).group(1))


def clear_staging(run_dir: Path) -> None:
    """Remove what a killed run left half-written."""
    shutil.rmtree(Path(run_dir) / STAGING, ignore_errors=True)


def publish(staged: Path, run_dir: Path, info: dict, keep: int) -> Path:
    """Move a complete staged checkpoint into checkpoints/ atomically; then keep only the `keep` newest."""
    (staged / MARKER).write_text(json.dumps(info, indent=1) + "\n")
    _fsync_tree(staged)
    target_dir = Path(run_dir) / CHECKPOINTS
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / staged.name
    old = None
    if target.exists():  # the same step saved again (a resumed run): swap, then drop the old copy
        old = target.with_name(f".old-{staged.name}")
        shutil.rmtree(old, ignore_errors=True)
        os.rename(target, old)
    os.rename(staged, target)
    _fsync_dir(target_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    for stale in checkpoints(run_dir)[:-keep]:
        shutil.rmtree(stale, ignore_errors=True)
    return target


class AtomicCheckpoints(TrainerCallback):
    """Publishes each checkpoint the Trainer saves (see the module docstring)."""

    def __init__(self, run_dir: Path, keep: int, info: dict):
        self.run_dir, self.keep, self.info = Path(run_dir), keep, info
        self.published: Path | None = None

    def on_save(self, args, state, control, **kwargs):
        staged = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and staged.is_dir():
            info = {**self.info, "step": state.global_step}
            self.published = publish(staged, self.run_dir, info, self.keep)


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
