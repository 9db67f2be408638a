"""Nested trials (schedule "n", coevo/search/nested.py): each harness is scored with a LoRA adapter trained
under it. The real tiny model is built and trained in the run, episodes run in real sandboxes, Optuna and
MLflow are real sqlite stores; a kill -9 in the middle of the nested phase resumes to the same table."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from search_helpers import ROOT, final_table, study_trials, write_config

NESTED_SPACE = """
templates.system: {type: categorical, choices: [system_terse.j2, system_verbose.j2]}
recovery.format_error_feedback: {type: categorical, choices: [true, false]}
"""
"""Two harness dimensions that change what the model sees (so the trials' fingerprints differ), and short
episodes: the tiny model scores every pair itself."""


def test_a_nested_search_scores_each_harness_with_an_adapter_trained_under_it(suite, tmp_path):
    import optuna
    from mlflow import MlflowClient
    from safetensors.torch import load_file

    from coevo.harness.fingerprint import fingerprint
    from coevo.rollout import load_trajectories
    from coevo.search.config import load_config
    from coevo.search.run import Search
    from coevo.search.space import split_overrides

    config = load_config(write_config(  # policy None: every pair is scored by the tiny model itself
        tmp_path, suite, name="nested", schedule="n", policy=None, train={"sft_epochs": 1},
        overrides={"limits.max_turns": 3, "limits.max_tokens_per_turn": 48},
        splits={"promotion": 6, "test": 6, "held_out": 0},
        plan={"trials": 3, "dev_tasks": 4, "batches": 2, "train_tasks": 3, "top_k": 2}))
    Path(config.space).write_text(NESTED_SPACE)
    search = Search(config, log=lambda line: None)
    state = search.run()
    inputs, run_dir = search.ctx.inputs, config.run_dir
    assert state.done and state.checkpoints[-1] == str(run_dir / "checkpoints" / "n1")
    assert (run_dir / "checkpoints" / "n1" / "config.json").is_file()  # the best pair, merged: a plain folder
    study = optuna.load_study(study_name="nested.n1", storage=f"sqlite:///{run_dir / 'optuna.db'}")
    trials = [t for t in study.trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(trials) == 3 and all(t.intermediate_values for t in trials)  # reported after the first batch
    fingerprints = set()
    for t in trials:
        adapter = Path(t.user_attrs["adapter"])
        assert (adapter / "adapter_config.json").is_file() and not (adapter / "config.json").is_file()
        assert any(v.abs().sum() > 0 for k, v in load_file(adapter / "adapter_model.safetensors").items()
                   if "lora_B" in k)  # trained: B starts at 0
        overrides, _ = split_overrides(inputs.space.resolve(t.params))
        trained = json.loads((adapter.parent / "nested.json").read_text())["harness_fingerprint"]
        assert trained == t.user_attrs["trained_fingerprint"] == fingerprint(inputs.harness(overrides))
        episodes = load_trajectories(adapter.parent / "data" / "replay.jsonl")
        assert episodes and {e.harness_fingerprint for e in episodes} == {trained}  # its data, rendered under it
        fingerprints.add(trained)
    assert len(fingerprints) > 1  # the trials trained under different harnesses

    client = MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    runs = {r.info.run_name: r for r in client.search_runs(
        [client.get_experiment_by_name("nested").experiment_id], max_results=500)}
    trial_run = runs["n1 #0"]
    assert trial_run.data.tags["harness_fingerprint"] == trials[0].user_attrs["trained_fingerprint"]
    assert trial_run.data.tags["adapter"] == trials[0].user_attrs["adapter"]
    assert "lora.rank" in trial_run.data.params and "objective" in trial_run.data.metrics
    assert "adapter/adapter_config.json" in [a.path for a in client.list_artifacts(
        trial_run.info.run_id, "adapter")]
    assert runs["n1 #0 eval"].data.tags["mlflow.parentRunId"] == trial_run.info.run_id
    assert [h["phase"] for h in state.history] == ["start", "n1", "arm harness-only", "arm weights-only"]
    assert state.budgets["harness-only"]["budget"] == state.budgets["weights-only"]["budget"] == 3
    base = fingerprint(inputs.base)
    for i in range(3):  # the weights arm: as many trainings, all under the base harness
        arm = run_dir / "adapters" / f"arm-weights-{i}"
        assert json.loads((arm / "nested.json").read_text())["harness_fingerprint"] == base


def test_a_nested_search_killed_mid_phase_resumes_to_the_same_table(suite, tmp_path):
    from coevo.search.config import load_config
    from coevo.search.run import Search
    from coevo.search.state import load_state

    fields = {"name": "nested", "schedule": "n", "arms": False, "train": {"sft_epochs": 1},
              "plan": {"trials": 4, "dev_tasks": 8, "batches": 2, "train_tasks": 3, "top_k": 2}}
    (tmp_path / "straight").mkdir()
    (tmp_path / "killed").mkdir()
    Search(load_config(write_config(tmp_path / "straight", suite, **fields)), log=lambda line: None).run()
    straight = load_state(tmp_path / "straight" / "runs" / "nested" / "state.json")  # as read back: lists, not tuples
    config_path = write_config(tmp_path / "killed", suite, **fields)
    run_dir = tmp_path / "killed" / "runs" / "nested"
    cmd = [sys.executable, "-m", "coevo.cli", "search"]
    proc = subprocess.Popen([*cmd, str(config_path)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:  # kill inside the third trial: after TPE's start-up trials
            rows = study_trials(run_dir / "optuna.db", "nested.n1")
            if sum(s in ("COMPLETE", "PRUNED") for _, s, _ in rows) >= 2 and any(s == "RUNNING" for _, s, _ in rows):
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            time.sleep(0.1)
        else:
            pytest.fail("no nested trial was running in time")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    result = subprocess.run([*cmd, "--resume", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    states = [s for _, s, _ in study_trials(run_dir / "optuna.db", "nested.n1")]
    assert "FAIL" in states and sum(s in ("COMPLETE", "PRUNED") for s in states) == 4  # the killed trial, re-run
    resumed = load_state(run_dir / "state.json")
    assert resumed.done and final_table(resumed) == final_table(straight)
