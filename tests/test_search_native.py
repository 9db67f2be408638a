"""`coevo search` on a native agent: mini-swe-agent, unmodified. w0 warm-starts the tiny model on the oracle's
episodes played through the agent's own loop, Optuna searches its config's settings, TRL GRPO trains on
the episodes `coevo serve` recorded of it, and the pair is exported as a bundle that `coevo eval --bundle`
runs. Small (a few tasks a role, 2-step episodes, one GRPO step): the point is that every phase, the final
table and the bundle take a native harness for real."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from serve_helpers import torch_threads

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def native_config(tmp_path: Path, suite: Path, **fields) -> Path:
    # action_regex: a setting the agent's config file leaves to its class default (in no dump of the harness)
    (tmp_path / "space.yaml").write_text("agent_settings.step_limit: {type: int, low: 2, high: 3}\n"
                                         "environment_settings.timeout: {type: categorical, choices: [10, 30]}\n"
                                         "model_settings.action_regex: {type: categorical, choices: "
                                         "['```mswea_bash_command\\s*\\n(.*?)\\n```', '```bash\\n(.*?)\\n```']}\n")
    config = {"name": "native", "tasks": str(suite), "harness": str(ROOT / "harnesses/native/mini_swe_agent.yaml"),
              "space": str(tmp_path / "space.yaml"), "runs_dir": str(tmp_path / "runs"),
              "schedule": "w0 -> h -> w", "arms": False, "objective": "mean_reward",
              "overrides": {"agent_settings.step_limit": 2, "decoding.max_tokens": 96},
              "train": {"mode": "rl", "tasks_per_step": 2, "group_size": 2, "reward": "partial", "temperature": 1.0},
              "plan": {"trials": 2, "dev_tasks": 3, "batches": 1, "train_tasks": 4, "grpo_steps": 1, "top_k": 1,
                       "warmstart_epochs": 1, "warmstart_augment": 0, "warmstart_harnesses": 1},
              "splits": {"promotion": 3, "test": 3}, **fields}
    path = tmp_path / "native.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_native_agent_is_searched_trained_and_exported(tmp_path, suite):
    import optuna
    from mlflow import MlflowClient

    from coevo.harness import load_harness
    from coevo.harness.fingerprint import fingerprint
    from coevo.search.config import load_config
    from coevo.search.run import Search

    config = load_config(native_config(tmp_path, suite))
    with torch_threads(1):
        state = Search(config, log=lambda line: None).run()

    # w0: the oracle, playing each solution through mini-swe-agent's loop, solved every train task.
    warm = json.loads((config.run_dir / "checkpoints" / "w0" / "warmstart.json").read_text())
    assert warm["oracle_passed"] == warm["tasks"] == 4 and warm["harness"] == "mini_swe_agent"
    assert Path(state.checkpoints[0]).name == "w0"
    study = optuna.load_study(study_name="native.h1", storage=f"sqlite:///{config.run_dir / 'optuna.db'}")
    # w0's robustness pair (the variant it also taught) opens the study, then the 2 trials of the plan
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    assert all(set(t.params) == {"agent_settings.step_limit", "environment_settings.timeout",
                                 "model_settings.action_regex"} for t in study.trials)
    base = load_harness(config.harness).with_overrides(config.overrides)
    assert state.baseline.fingerprint == fingerprint(base)  # the agent's effective config, hashed
    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    runs = {r.info.run_name: r for r in client.search_runs(
        [client.get_experiment_by_name("native").experiment_id], max_results=200)}
    trial = next(r for name, r in runs.items() if name.startswith("h1 #"))
    assert trial.data.params["agent_settings.step_limit"] in ("2", "3")
    assert "mswea_bash_command" in trial.data.params["agent_settings.system_template"]
    # The w-phase: TRL GRPO on the served episodes, whose loss region is exactly the sampled tokens.
    training = runs["w1"].data.metrics
    assert training["grpo/tokens/loss_region_drift"] == 0 and training["grpo/drift/max"] == 0
    assert "grpo/tokens/segments_dropped" in training and training["grpo/completions/mean_length"] > 0
    assert list((config.run_dir / "checkpoints").glob("w1*/**/model.safetensors"))
    assert [h["phase"] for h in state.history][:3] == ["start", "h1", "w1"]
    assert state.done and set(state.test) >= {"baseline", "co-evolved"}

    bundle = tmp_path / "bundle"
    subprocess.run([sys.executable, "-m", "coevo.cli", "export", str(config.run_dir), "--out", str(bundle)],
                   cwd=ROOT, check=True, capture_output=True)
    exported = yaml.safe_load((bundle / "harness.yaml").read_text())
    assert exported["kind"] == "native" and (bundle / exported["config_file"]).is_file()
    report = json.loads((bundle / "report.json").read_text())
    again = subprocess.run([sys.executable, "-m", "coevo.cli", "eval", "--bundle", str(bundle), "--tasks",
                            report["lineage"]["tasks"]["path"], "--split", "test", "--json",
                            "--out", str(tmp_path / "again.jsonl")], cwd=ROOT, check=True, capture_output=True,
                           text=True)
    assert json.loads(again.stdout)["overall"]["episodes"] == report["test"]["episodes"]


def test_a_native_search_config_is_checked_before_it_runs(tmp_path, suite):
    from coevo.search.config import load_config
    from coevo.search.errors import SearchError
    from coevo.search.inputs import load_inputs

    with pytest.raises(SearchError, match="GEPA evolves coevo's own template files"):
        load_inputs(load_config(native_config(tmp_path, suite, space=str(write(tmp_path / "gepa.yaml", (
            "agent_settings.system_template: {evolve: gepa, budget: 4}\n"))))))
    # `coevo check` times an oracle episode played through the agent's own loop, in its format.
    check = subprocess.run([sys.executable, "-m", "coevo.cli", "check", str(native_config(tmp_path, suite))],
                           cwd=ROOT, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert "one oracle episode" in " ".join(check.stdout.split())
    # The shipped space: a setting the config file leaves to its class's default (action_regex) is valid too.
    shipped = load_inputs(load_config(native_config(tmp_path, suite, space=str(ROOT / "search_spaces/mini_swe_agent.yaml"))))
    assert "model_settings.action_regex" in [p.path for p in shipped.space.params]
    path = native_config(tmp_path, suite)
    (tmp_path / "space.yaml").write_text("agent_settings.step_limt: {type: int, low: 1, high: 2}\n")
    with pytest.raises(SearchError, match=r"'step_limt' is not a setting of the agent's agent_settings "
                                          r"\(valid: .*agent_settings.step_limit"):
        load_inputs(load_config(path))
