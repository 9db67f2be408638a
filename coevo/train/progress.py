"""One rich progress bar per training run, in place of transformers' own console output: PrinterCallback
(a raw `{'loss': ..., 'grad_norm': ...}` dict per logging step) and ProgressCallback (tqdm).

The bar shows step k/N, the last loss and the time left. Each dict the Trainer logs still goes to the log
at DEBUG (so RUN/search.log keeps the numbers) and to the reporters (MLflow) as before; the end-of-training
summary is one INFO line. Under -q there is no bar.
"""

from __future__ import annotations

import logging
import warnings

from transformers import PrinterCallback, ProgressCallback, TrainerCallback

log = logging.getLogger(__name__)

# TRL 1.16 calls a transformers 5 method that warns of its own deprecation when a trainer is built: set
# here, on import, because both trainers import this module before they build one.
warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)


class TrainProgress(TrainerCallback):
    def __init__(self, description: str):
        self.description, self.bar, self.task = description, None, None

    def on_train_begin(self, args, state, control, **kwargs):
        import rich.progress as rp

        from coevo import logs

        if not state.is_world_process_zero or not logs.shows():
            return
        columns = (rp.TextColumn("{task.description}"), rp.BarColumn(), rp.MofNCompleteColumn(),
                   rp.TextColumn("{task.fields[info]}"), rp.TimeElapsedColumn(), rp.TimeRemainingColumn())
        self.bar = rp.Progress(*columns, console=logs.console())
        self.task = self.bar.add_task(self.description, total=state.max_steps, completed=state.global_step,
                                      info="")
        self.bar.start()

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(self.task, completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero:
            return
        numbers = ", ".join(f"{k} {_short(v)}" for k, v in logs.items())
        log.debug("%s step %d/%d: %s", self.description, state.global_step, state.max_steps, numbers)
        if "train_runtime" in logs:  # the end-of-training summary
            log.info("%s: %d steps in %.1fs, mean loss %s", self.description, state.global_step,
                     logs["train_runtime"], _short(logs.get("train_loss", float("nan"))))
        elif self.bar is not None and "loss" in logs:
            self.bar.update(self.task, info=f"loss {_short(logs['loss'])}")

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(self.task, completed=state.global_step)
        self.close()

    def close(self) -> None:
        """Stop the bar; for a `finally:` around `trainer.train()`, which skips on_train_end when it raises."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _short(value) -> str:
    return format(value, ".4g") if isinstance(value, float) else str(value)


def show_progress(trainer, description: str) -> TrainProgress:
    """Swap the Trainer's console callbacks (PrinterCallback or tqdm's ProgressCallback) for a TrainProgress."""
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    callback = TrainProgress(description)
    trainer.add_callback(callback)
    return callback
