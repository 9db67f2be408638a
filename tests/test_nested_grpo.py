"""GRPO inside nested trials (plan.inner_grpo_steps, coevo/search/inner.py): after its LoRA SFT, each trial's
adapter goes on training by GRPO under the trial's own harness. The real tiny model is built and trained in
the run, episodes run in real sandboxes, Optuna and MLflow are real sqlite stores."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from search_helpers import NESTED_SPACE, search_process, write_config

FIELDS = {"schedule": "n", "policy": None, "arms": False,
          "train": {"sft_epochs": 1, "temperature": 1.0, "reward": "partial", "tasks_per_step": 1, "group_size": 4,
                    "learning_rate": 1e-3},
          "overrides": {"limits.max_turns": 3, "limits.max_tokens_per_turn": 48},
          "splits": {"promotion": 4, "test": 4, "held_out": 0}}
"""The tiny model, built in the run, plays every episode; 1 task x 4 episodes per GRPO step."""


def test_each_nested_trial_trains_its_sft_adapter_on_by_grpo_under_its_own_harness(suite, tmp_path):
    import optuna
    import torch
    from mlflow import MlflowClient
    from safetensors.torch import load_file

    from coevo.search.config import load_config
    from coevo.search.run import Search
    from coevo.search.space import split_overrides

    config = load_config(write_config(tmp_path, suite, name="nested-grpo", **FIELDS, plan={
        "trials": 2, "dev_tasks": 3, "batches": 1, "train_tasks": 3, "top_k": 1, "inner_grpo_steps": 2}))
    Path(config.space).write_text(NESTED_SPACE)
    search = Search(config, log=lambda line: None)
    state = search.run()
    run_dir, inputs = config.run_dir, search.ctx.inputs
    assert state.done
    study = optuna.load_study(study_name="nested-grpo.n1", storage=f"sqlite:///{run_dir / 'optuna.db'}")
    trials = [t for t in study.trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(trials) == 2 and not [t.user_attrs.get("error") for t in trials if "error" in t.user_attrs]
    client = MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    for t in trials:
        adapter = Path(t.user_attrs["adapter"])
        folder = adapter.parent
        record = json.loads((folder / "nested.json").read_text())
        assert record["grpo_steps"] == 2 and "GRPO on 3 tasks, 2 steps" in record["grpo_summary"]
        steps = [json.loads(line) for line in (folder / "grpo" / "metrics.jsonl").read_text().splitlines()]
        assert [s["step"] for s in steps] == [1, 2]
        # GRPO sampled under the trial's own harness (at the training temperature), from the model being
        # trained: the trainer's and the rollout's logprobs of the same tokens agree (both hold the SFT
        # adapter, then its updates).
        trained_under = inputs.harness(split_overrides(inputs.space.resolve(t.params))[0])
        assert (folder / "grpo" / "harness.yaml").read_text() == trained_under.with_overrides(
            {"decoding.temperature": 1.0}).to_yaml()
        assert all(s["mismatch/mean_abs_diff"] < 1e-3 for s in steps)
        # GRPO continued the SFT adapter (same shapes, its own base) and moved it exactly when a group had
        # signal: zero advantage everywhere leaves the weights as SFT left them.
        sft, final = load_file(folder / "sft" / "adapter_model.safetensors"), load_file(
            adapter / "adapter_model.safetensors")
        assert sft.keys() == final.keys()
        assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == \
            record["base"]
        moved = any(not torch.equal(sft[k], final[k]) for k in sft)
        signal = sum(s.get("groups/no_signal", 0) for s in steps) < 2
        assert moved == signal, (moved, steps)
        assert not (folder / "grpo" / "checkpoints").exists()  # merged copies removed once published
        run = client.get_run(client.search_runs(
            [client.get_experiment_by_name("nested-grpo").experiment_id],
            filter_string=f"tags.mlflow.runName = '{t.user_attrs['label']}'")[0].info.run_id)
        assert run.data.tags["grpo"] == record["grpo_summary"]
        history = client.get_metric_history(run.info.run_id, "grpo/reward")
        assert sorted(m.step for m in history) == [1, 2]
        # Inner step 0: the SFT adapter was scored on the first evolve batch before GRPO and reported to the
        # pruner; the evolve batches of the trained adapter come after it (one batch here: nothing more).
        assert t.intermediate_values == {0: t.user_attrs["sft_objective"]}
        check = client.search_runs([run.info.experiment_id],
                                   filter_string=f"tags.mlflow.runName = '{t.user_attrs['label']} sft eval'")
        assert len(check) == 1 and check[0].data.tags["adapter"] == str(folder / "sft")
        assert check[0].data.metrics["objective"] == t.user_attrs["sft_objective"]
        assert check[0].data.metrics["episodes"] == len(inputs.dev_batches[0]) * inputs.plan.samples
    inner_pruning_stops_a_trial_before_its_grpo(search, study.study_name)


def inner_pruning_stops_a_trial_before_its_grpo(search, study_name: str) -> None:
    """A trial that the pruner stops at inner step 0 keeps its SFT adapter and never runs GRPO. The median
    rule's verdict depends on earlier trials' scores, so a threshold above any objective makes it certain
    here; the check, the report and the stop are the nested phase's own code."""
    import optuna

    from coevo.search.nested import NestedObjective

    ctx, state = search.ctx, search.ctx.ledger.state
    probe = optuna.create_study(storage=ctx.storage, study_name=f"{study_name}.probe", direction="maximize",
                                pruner=optuna.pruners.ThresholdPruner(lower=1.01))
    objective = NestedObjective(ctx, "n1", state.phase_runs["n1"], probe.study_name, state.baseline)
    objective.slot = 9
    probe.optimize(objective, n_trials=1)
    trial, folder = probe.trials[0], ctx.run_dir / "adapters" / "n1-t9"
    assert trial.state == optuna.trial.TrialState.PRUNED and list(trial.intermediate_values) == [0]
    assert (folder / "sft" / "adapter_config.json").is_file()
    assert not (folder / "grpo").exists() and not (folder / "adapter").exists()


def test_a_search_killed_inside_a_trials_grpo_resumes_it_from_its_checkpoint(suite, tmp_path):
    """SIGKILL once the trial's first GRPO step is published: `coevo search --resume` keeps the trial's SFT
    adapter, continues GRPO from step 1 and publishes the trial's adapter."""
    from coevo.search.state import load_state

    config = write_config(tmp_path, suite, name="killed", **FIELDS, plan={
        "trials": 1, "dev_tasks": 3, "batches": 1, "train_tasks": 3, "top_k": 1, "inner_grpo_steps": 3})
    (tmp_path / "space.yaml").write_text(NESTED_SPACE)
    run_dir, log = tmp_path / "runs" / "killed", tmp_path / "search.log"
    folder = run_dir / "adapters" / "n1-t0"
    process, deadline = search_process([str(config)], log), time.monotonic() + 600
    while not (folder / "grpo" / "checkpoints" / "checkpoint-1").is_dir():
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no GRPO checkpoint within 600 s"
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert not (folder / "adapter").exists()  # killed inside the trial's inner loop
    sft_written = (folder / "sft" / "adapter_model.safetensors").stat().st_mtime_ns
    resumed = search_process(["--resume", str(run_dir)], log)
    assert resumed.wait(timeout=900) == 0, log.read_text()[-3000:]
    assert load_state(run_dir / "state.json").done
    assert (folder / "sft" / "adapter_model.safetensors").stat().st_mtime_ns == sft_written  # not retrained
    record = json.loads((folder / "nested.json").read_text())
    assert record["grpo_steps"] == 3 and (folder / "adapter" / "adapter_config.json").is_file()
    run = json.loads((folder / "grpo" / "run.json").read_text())
    assert run["resumed_from"] >= 1  # the resumed GRPO run went on from a checkpoint, not from step 0
    steps = [json.loads(line)["step"] for line in (folder / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
