"""Per-step reporting of a GRPO run: one log line per step (INFO, rich markup), RUN_DIR/metrics.jsonl, and
`time/train` added to TRL's logs before the reporters (MLflow) see them. Also the run's wall-time budget.

The rollout's own metrics reach TRL's logs through the reward function's `log_metric`; only the training
time is known after the backward pass, so this callback adds it (it runs before the reporters).
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

from transformers import TrainerCallback

from coevo.logs import MARKUP

log = logging.getLogger(__name__)


class StepLog(TrainerCallback):
    def __init__(self, bridge, path: Path, total_steps: int):
        self.bridge, self.path, self.total = bridge, Path(path), total_steps
        self.t0 = time.monotonic()

    def on_step_begin(self, args, state, control, **kwargs):
        self.t0 = time.monotonic()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "train_runtime" in logs:  # the end-of-training summary is not a step
            return
        step_s = time.monotonic() - self.t0
        rolled = self.bridge.last_step == state.global_step - 1  # num_iterations > 1 reuses rollouts
        logs["time/step"] = step_s
        rollout_s = self.bridge.stats.get("time/rollout_func", 0.0) if rolled else 0.0
        logs["time/train"] = max(0.0, step_s - rollout_s)
        record = {"step": state.global_step,
                  **{k: v for k, v in logs.items() if isinstance(v, int | float) and not isinstance(v, bool)}}
        if state.is_world_process_zero:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                f.write(json.dumps(record) + "\n")
            log.info(step_line(record, self.total), extra=MARKUP)


def step_line(m: dict, total: int) -> str:
    """One line of rich markup that summarises a step's record."""
    def get(key: str, fmt: str = ".3f") -> str:
        v = m.get(key)
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    groups = m.get("groups/no_signal")
    frac = m.get("groups/no_signal_frac")
    n_groups = round(groups / frac) if groups and frac else None
    parts = [
        f"[bold]step {m['step']}/{total}[/]",
        f"reward {get('reward/mean')} ± {get('reward/std', '.2f')}",
        f"pass {100 * m.get('pass_rate', 0):.0f}%",
        f"no-signal {get('groups/no_signal', '.0f')}" + (f"/{n_groups}" if n_groups else ""),
        f"loss {get('loss', '.4f')}",
        (f"mismatch r {get('mismatch/pearson', '.4f')} |Δ| {get('mismatch/mean_abs_diff', '.1e')} "
         f"KL {get('mismatch/kl', '.1e')}"),
        f"drift {get('drift/max', '.0f')}",
        (f"gen {get('time/generate', '.1f')}s sandbox {get('time/sandbox', '.1f')}s "
         f"verify {get('time/verify', '.1f')}s train {get('time/train', '.1f')}s"),
    ]
    return " | ".join(parts)


class TimeBudget(TrainerCallback):
    """Stops training, with a checkpoint, after the first step that ends past `minutes` of wall time."""

    def __init__(self, minutes: float):
        self.seconds, self.t0 = minutes * 60, time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self.t0 = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.t0 > self.seconds:
            control.should_training_stop = True
            control.should_save = True
