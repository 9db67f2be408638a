"""`coevo search` end to end: real sqlite Optuna storage, a real MLflow sqlite store, real sandboxes and
verifiers. The policy is the synthetic harness-sensitive oracle (coevo/policy/synthetic.py) where the
optimizer is the point, and the real tiny model (SFT + GRPO) where co-evolution is."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from search_helpers import ROOT, write_config


@pytest.fixture(scope="module")
def finished_run(suite, tmp_path_factory):
    """One small search, shared by the tests that read its stores."""
    from coevo.search.config import load_config
    from coevo.search.run import Search

    folder = tmp_path_factory.mktemp("search")
    config = load_config(write_config(folder, suite))
    state = Search(config, log=lambda line: None).run()
    return config, state


def test_search_runs_trials_tracks_every_pair_and_ends_with_the_test_table(finished_run):
    import optuna
    from mlflow import MlflowClient

    from coevo.outcomes import SUMMARY_METRICS
    from coevo.search.final import ROWS

    config, state = finished_run
    assert state.done and list(state.test) == list(ROWS)
    for row in state.test.values():
        assert row["ci_low"] <= row["pass_at_1"] <= row["ci_high"] and row["episodes"] == 18
        assert row["held_out"]["episodes"] == 9  # the suite's held-out families, scored apart
    study = optuna.load_study(study_name=f"{config.name}.h1", storage=f"sqlite:///{config.run_dir / 'optuna.db'}")
    assert len([t for t in study.trials if t.state.name in ("COMPLETE", "PRUNED")]) == 4
    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(config.name).experiment_id], max_results=500)
    by_name = {r.info.run_name: r for r in runs}
    assert {"search search", "h1", "arms", "test", "baseline", "h1 #0", "test baseline"} <= set(by_name)
    assert all(r.info.status == "FINISHED" for r in runs)
    trial = by_name["h1 #0"]
    assert trial.data.tags["mlflow.parentRunId"] == by_name["h1"].info.run_id
    assert by_name["h1"].data.tags["mlflow.parentRunId"] == state.parent_run
    assert {"phase", "generation", "checkpoint", "harness_fingerprint"} <= set(trial.data.tags)
    assert trial.data.params["decoding.temperature"] == "0.0" and "limits.max_turns" in trial.data.params  # greedy
    assert trial.data.tags["state"] == "COMPLETE"  # the pruner judges no trial before two have finished
    assert set(SUMMARY_METRICS) <= set(trial.data.metrics)
    assert any(k.startswith("family/") for k in trial.data.metrics)
    artifacts = {a.path for a in client.list_artifacts(trial.info.run_id)}
    assert {"harness.yaml", "rendered_prompts.md", "per_task.csv", "trajectories_sample.jsonl"} <= artifacts
    plots = {a.path for a in client.list_artifacts(by_name["h1"].info.run_id, "plots")}
    assert "plots/optimization_history.png" in plots
    parent = client.get_run(state.parent_run)
    assert "test/co-evolved/pass_at_1" in parent.data.metrics
    co, verdict = state.test["co-evolved"], state.verdict  # co-evolved against each fair arm, paired
    for arm in ("harness-only", "weights-only"):
        other = state.test[arm]["per_task"]
        gain = sum(co["per_task"][t] - other[t] for t in other) / len(other)
        versus = verdict["versus"][arm]
        assert versus.gain == pytest.approx(gain) == parent.data.metrics[f"test/co-evolved/vs_{arm}/gain"]
        assert versus.low <= gain <= versus.high
    assert verdict["beats_both_arms"] == all(v.low > 0 for v in verdict["versus"].values())
    assert {"delta_h", "delta_m", "interaction"} == set(verdict["effects"])
    assert "test/2x2/interaction_low" in parent.data.metrics
    assert {"test_table.md", "plots"} <= {a.path for a in client.list_artifacts(state.parent_run)}
    assert "plots/two_by_two.png" in {a.path for a in client.list_artifacts(state.parent_run, "plots")}


def test_compare_prints_the_variants_from_mlflow(finished_run):
    from coevo.search.final import ROWS

    config, _ = finished_run
    out = subprocess.run([sys.executable, "-m", "coevo.cli", "compare", str(config.run_dir), "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    rows = json.loads(out)
    assert rows[0]["pass_at_1"] == max(r["pass_at_1"] or 0 for r in rows)
    assert {"h1 #0", "baseline"} <= {r["run"] for r in rows}
    assert all(r["differs"] for r in rows if r["run"].startswith("h1 #") and r["state"] != "FAIL")
    assert not [r for r in rows if r["run"].startswith(("test ", "promote ", "held-out "))]  # evolve scores only
    out = subprocess.run([sys.executable, "-m", "coevo.cli", "compare", str(config.run_dir), "--role", "test",
                          "--json"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert {r["run"] for r in json.loads(out)} <= {"test " + row for row in ROWS}  # one task set per table



def test_export_bundle_reloads_and_reproduces_its_score(finished_run, tmp_path):
    from coevo.bundle import load_bundle
    from coevo.evaluate import evaluate
    from coevo.policy.synthetic import HarnessSensitivePolicy
    from coevo.tasks import load_taskset

    config, state = finished_run
    out = tmp_path / "bundle"
    subprocess.run([sys.executable, "-m", "coevo.cli", "export", str(config.run_dir), "--out", str(out),
                    "--register", "coevo-test"], cwd=ROOT, check=True, capture_output=True)
    assert {p.name for p in out.iterdir()} == {"harness.yaml", "prompts", "model", "report.json", "README.md"}
    harness, model_dir, report = load_bundle(out)
    assert (model_dir / "config.json").is_file() and report["pair"] == "co-evolved"
    lineage = report["lineage"]
    assert lineage["run"] == config.name and len(lineage["tasks"]["sha256"]) == 64 and lineage["seed"] == 0
    assert {"coevo", "torch", "optuna", "mlflow"} <= set(lineage["versions"])
    assert harness.prompts_path == (out / "prompts").resolve()  # self-contained: templates travel with it
    tasks = load_taskset(config.tasks).split("test")
    again = evaluate(tasks, harness, HarnessSensitivePolicy(harness, tasks, seed=0), samples=1, seed=0)
    test = report["test"]
    assert test["ci_low"] <= again.overall.pass_at_1 <= test["ci_high"]
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    assert client.search_model_versions("name = 'coevo-test'")[0].run_id == state.parent_run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mlflow_server_serves_the_runs_over_its_rest_api(finished_run):
    config, _ = finished_run
    port = _free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    server = subprocess.Popen([str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
                               f"sqlite:///{config.run_dir / 'mlflow.db'}", "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240  # ~6 s on an idle machine; much more on a loaded one
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "mlflow server did not come up"
                time.sleep(0.5)
        request = urllib.request.Request(f"{base}/api/2.0/mlflow/experiments/get-by-name?experiment_name={config.name}")
        experiment = json.load(urllib.request.urlopen(request, timeout=10))["experiment"]["experiment_id"]
        body = json.dumps({"experiment_ids": [experiment], "filter": "tags.phase = 'h1'", "max_results": 100}).encode()
        request = urllib.request.Request(f"{base}/api/2.0/mlflow/runs/search", data=body,
                                         headers={"Content-Type": "application/json"})
        runs = json.load(urllib.request.urlopen(request, timeout=10))["runs"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    trials = [r for r in runs if r["info"]["run_name"].startswith("h1 #")]
    assert len(trials) == 4
    params = {p["key"]: p["value"] for p in trials[0]["data"]["params"]}
    assert "limits.max_turns" in params and "action_format.kind" in params
    complete = [r for r in trials if {t["key"]: t["value"] for t in r["data"]["tags"]}.get("state") == "COMPLETE"]
    metrics = {m["key"] for m in complete[0]["data"]["metrics"]}
    assert {"pass_at_1", "ci_low", "ci_high"} <= metrics


def test_acceptance_is_decided_on_promotion_tasks_never_on_the_scores_that_chose_the_trial(finished_run):
    from coevo.evaluate.stats import paired_gain
    from coevo.tasks import load_taskset

    config, state = finished_run
    promotion = {t.name for t in load_taskset(config.run_dir / "splits" / "promotion").tasks}
    evolve = set(state.baseline.per_task)  # the dev tasks every trial was scored (and chosen) on
    assert len(promotion) == 12 and not promotion & evolve
    decided = [h for h in state.history if h["phase"] == "h1"]
    assert len(decided) == 1
    candidate = next(p for p in state.pool if p.source == decided[0]["challenger"])
    assert set(candidate.per_task) == evolve  # what Optuna saw
    before, after = state.promotion[state.baseline.key], state.promotion[candidate.key]
    assert set(before) == set(after) == promotion  # what the ratchet saw
    g = paired_gain(before, after, seed=config.seed)
    assert (decided[0]["gain"], decided[0]["wins"], decided[0]["losses"]) == (g.gain, g.wins, g.losses)
    assert decided[0]["accepted"] == g.clears(config.margin)
    assert (state.incumbent == candidate) == decided[0]["accepted"]
