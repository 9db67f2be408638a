"""Nested trials (schedule "n", coevo/search/nested.py): each harness is scored with a LoRA adapter trained
under it. The real tiny model is built and trained in the run, episodes run in real sandboxes, Optuna and
MLflow are real sqlite stores; kill -9 at seeded random points of every phase, each resumed, ends with
the same table as a straight run."""

from __future__ import annotations

import json
from pathlib import Path

from search_helpers import (
    ARMS,
    final_table,
    finished_trials,
    killed_search,
    study_trials,
    timed_search,
    write_config,
)


def test_a_nested_search_scores_each_harness_with_an_adapter_trained_under_it(nested_run):
    """conftest's `nested_run`: the tiny model scores every pair itself (policy None)."""
    import optuna
    from mlflow import MlflowClient
    from safetensors.torch import load_file

    from coevo.harness.fingerprint import fingerprint
    from coevo.rollout import load_trajectories
    from coevo.search.space import split_overrides

    state, inputs, run_dir = nested_run.state, nested_run.inputs, nested_run.folder
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


KILLS = ["start", "n1", "n1", *ARMS, "test"]
"""Where the killed run is SIGKILLed, in order: generation 0 and its baseline, the nested phase twice, each
fair arm and the final table."""


def test_a_nested_search_killed_in_every_phase_resumes_to_the_same_table(suite, tmp_path):
    """Six kills at seeded random points, each resumed with `coevo search --resume`: the final table (rows,
    verdict, ratchet decisions) is the straight run's."""
    from coevo.search.state import load_state

    fields = {"name": "nested", "schedule": "n", "train": {"sft_epochs": 1},
              "splits": {"promotion": 6, "test": 6, "held_out": 0},
              "plan": {"trials": 4, "dev_tasks": 4, "batches": 2, "train_tasks": 3, "top_k": 2}}
    runs = {}
    for kind in ("straight", "killed"):
        (tmp_path / kind).mkdir()
        runs[kind] = (write_config(tmp_path / kind, suite, **fields), tmp_path / kind / "runs" / "nested")
    config, run_dir = runs["straight"]
    durations = timed_search([str(config)], run_dir, tmp_path / "straight.log")
    straight = load_state(run_dir / "state.json")  # as read back: lists, not tuples
    config, run_dir = runs["killed"]
    killed = killed_search([str(config)], run_dir, tmp_path / "killed.log", KILLS, durations, seed=36)
    where = [(k.phase, k.after_s, k.running) for k in killed.kills]
    assert killed.returncode == 0, (tmp_path / "killed.log").read_text()[-3000:]
    assert len(killed.kills) == len(KILLS), f"the run finished after {where} (straight: {durations})"
    assert {"n1", *ARMS, "test"} <= {k.phase for k in killed.kills}, where
    in_trial = [t for k in killed.kills if k.phase == "n1" for t in k.running if t.startswith("nested.n1 #")]
    assert in_trial, f"no kill landed inside a nested trial: {where}"
    states = {number: state for number, state, _ in study_trials(run_dir / "optuna.db", "nested.n1")}
    assert all(states[int(t.split("#")[1])] == "FAIL" for t in in_trial)  # each killed trial failed, and was
    assert sum(s in ("COMPLETE", "PRUNED") for s in states.values()) == 4  # re-run: the straight run's 4
    resumed = load_state(run_dir / "state.json")
    assert resumed.done and final_table(resumed) == final_table(straight)
    # Every study proposed and scored what the straight run's did, in the same order: the table above could
    # come out equal by a tie (a resumed study that proposed other harnesses, scored alike).
    assert finished_trials(run_dir / "optuna.db") == finished_trials(runs["straight"][1] / "optuna.db")
