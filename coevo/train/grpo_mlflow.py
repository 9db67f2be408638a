"""GRPO's MLflow logging: with `report_to` resolved to mlflow, TRL's MLflowCallback logs params and every
step's metrics. If an MLflow run is active when `train_grpo` is called, the callback logs INTO that run and
leaves it open; with MLFLOW_NESTED_RUN=1 in the environment it opens a child run under it (and ends the child
when training ends). Without an active run it starts one (MLFLOW_EXPERIMENT_NAME, MLFLOW_RUN_ID are
honoured). A run the callback started is ended FAILED if training raises.

Importing this module is cheap: mlflow is only looked up, or imported inside `close`.
"""

from __future__ import annotations

import os
import sys

from coevo.train.spec import TrainSpec


def report_to(spec: TrainSpec) -> list[str]:
    """TRL's `report_to` for a spec: `auto` is mlflow when MLFLOW_TRACKING_URI is set or a run is active."""
    if spec.report_to != "auto":
        return [] if spec.report_to == "none" else [spec.report_to]
    return ["mlflow"] if os.environ.get("MLFLOW_TRACKING_URI") or active_run_id() is not None else []


def active_run_id() -> str | None:
    if "mlflow" not in sys.modules:  # nobody started a run in this process without importing mlflow
        return None
    run = sys.modules["mlflow"].active_run()
    return run.info.run_id if run else None


def close(trainer, caller_run: str | None, failed: bool) -> None:
    """End the run TRL's MLflow callback opened if training raised (it would stay RUNNING), and disarm the
    callback: transformers' MLflowCallback.__del__ ends whatever run is active when it is collected, which
    after a nested run is the caller's own run."""
    import mlflow
    from transformers.integrations import MLflowCallback

    if failed and active_run_id() not in (None, caller_run):
        mlflow.end_run(status="FAILED")
    callback = trainer.pop_callback(MLflowCallback)
    if callback is not None:
        callback._auto_end_run = False  # private, but the only switch; its own run is already ended
