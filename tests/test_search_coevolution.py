"""The whole loop with the real tiny model: w0 (SFT) -> h (Optuna) -> w (TRL GRPO, then re-scoring), the
four-row test table, and an exported bundle that `coevo eval --bundle` scores within its interval.
Kept small (few tasks, short episodes, one GRPO step): the point is that every piece runs for real. The run
is conftest's `tiny_coevolution`, which tests/test_search_repeat.py runs a second time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_tiny_model_coevolution_trains_rescores_and_exports(tiny_coevolution, tmp_path):
    """conftest's `tiny_coevolution` (search_helpers.tiny_coevolution_config)."""
    from mlflow import MlflowClient

    config, state = tiny_coevolution.config, tiny_coevolution.state
    w0, g1 = (Path(c) for c in state.checkpoints)
    assert w0.name == "w0" and (g1 / "config.json").is_file()
    assert g1.parent.parent.name in ("w1-t0", "w1-t1")  # TRL GRPO's checkpoint of the better training run
    import optuna

    runs = optuna.load_study(study_name="tiny.w1", storage=f"sqlite:///{config.run_dir / 'optuna.db'}").trials
    assert [t.state.name for t in runs] == ["COMPLETE", "COMPLETE"]
    assert runs[0].params["train.learning_rate"] == 1e-4  # the config's own options come first
    # h1's best harness, then w1's new weights, then the fair arms, each decided on the promotion tasks
    phases = [h["phase"] for h in state.history]
    assert phases[:3] == ["start", "h1", "w1"] and phases[-2:] == ["arm harness-only", "arm weights-only"]
    assert {h["wins"] + h["losses"] + h["ties"] for h in state.history[1:] if not h.get("error")} == {6}
    assert state.budgets["weights-only"]["budget"] == 2  # 1 step x 1 w-phase x 2 training runs of its study
    assert state.budgets["harness-only"]["budget"] == 2  # 2 trials x 1 h-phase, all on generation 0
    assert list((config.run_dir / "checkpoints" / "arm-weights").rglob("config.json"))  # its own checkpoint
    weights_arm = state.arms["weights-only"]  # promoted on its own merits, else the baseline
    assert weights_arm.checkpoint == state.baseline.checkpoint or "arm-weights" in weights_arm.checkpoint
    assert state.test["weights-only"]["checkpoint"] == weights_arm.checkpoint
    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id], max_results=200)
    by_name = {r.info.run_name: r for r in runs}
    training = by_name["w1 train #0"]  # one GRPO run per train.* trial, nested under the phase
    assert training.data.tags["mlflow.parentRunId"] == by_name["w1"].info.run_id
    assert any(k.startswith("grpo/") for k in training.data.metrics)
    assert training.data.params["grpo.learning_rate"] == "0.0001"
    assert any(name.startswith("w1 rescore") for name in by_name)
    assert by_name["w1"].data.tags["mlflow.parentRunId"] == state.parent_run

    bundle = tmp_path / "bundle"
    subprocess.run([sys.executable, "-m", "coevo.cli", "export", str(config.run_dir), "--out", str(bundle)],
                   cwd=ROOT, check=True, capture_output=True)
    report = json.loads((bundle / "report.json").read_text())
    assert report["lineage"]["tasks"]["path"] == str(config.run_dir / "splits" / "test")  # the drawn test
    again = subprocess.run([sys.executable, "-m", "coevo.cli", "eval", "--bundle", str(bundle), "--tasks",
                            report["lineage"]["tasks"]["path"], "--split", "test", "--seed", "0", "--json",
                            "--out", str(tmp_path / "again.jsonl")],
                           cwd=ROOT, check=True, capture_output=True, text=True)
    overall = json.loads(again.stdout)["overall"]
    assert report["test"]["ci_low"] <= overall["pass_at_1"] <= report["test"]["ci_high"]
    assert overall["episodes"] == report["test"]["episodes"]
