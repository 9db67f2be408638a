"""`coevo search` end to end: real sqlite Optuna storage, a real MLflow sqlite store, real sandboxes and
verifiers. The policy is the synthetic harness-sensitive oracle (coevo/search/synthetic.py) where the
optimizer is the point, and the real tiny model (SFT + GRPO) where co-evolution is."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SMALL_SPACE = """
templates.system: {type: categorical, choices: [system_terse.j2, system_verbose.j2]}
action_format.kind: {type: categorical, choices: [json, bash_block]}
recovery.format_error_feedback: {type: categorical, choices: [true, false]}
recovery.max_format_retries: {type: int, low: 0, high: 3, when: {recovery.format_error_feedback: true}}
decoding.temperature: {type: float, low: 0.1, high: 1.2}
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """A small generated suite with all three splits (train 38, dev 19, test 9)."""
    from coevo.tasks.generate import generate_suite

    out = tmp_path_factory.mktemp("suite") / "tasks"
    generate_suite(out, seed=0, per_family=3)
    return out


def write_config(folder: Path, suite: Path, **fields) -> Path:
    (folder / "space.yaml").write_text(SMALL_SPACE)
    config = {"tasks": str(suite), "harness": str(ROOT / "harnesses" / "terminus_json.yaml"),
              "space": str(folder / "space.yaml"), "runs_dir": str(folder / "runs"), "schedule": "h",
              "policy": {"backend": "synthetic"}, "heartbeat_interval": 1, "grace_period": 3,
              "plan": {"trials": 4, "dev_tasks": 8, "batches": 2}, **fields}
    path = folder / f"{fields.get('name', 'search')}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


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

    config, state = finished_run
    assert state.done and list(state.test) == ["baseline", "harness-only", "weights-only", "co-evolved"]
    for row in state.test.values():
        assert row["ci_low"] <= row["pass_at_1"] <= row["ci_high"] and row["episodes"] == 9
    study = optuna.load_study(study_name=f"{config.name}.h1", storage=f"sqlite:///{config.run_dir / 'optuna.db'}")
    assert len([t for t in study.trials if t.state.name in ("COMPLETE", "PRUNED")]) == 4
    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(config.name).experiment_id], max_results=500)
    by_name = {r.info.run_name: r for r in runs}
    assert {"search search", "h1", "test", "baseline", "h1 #0", "test baseline"} <= set(by_name)
    assert all(r.info.status == "FINISHED" for r in runs)
    trial = by_name["h1 #0"]
    assert trial.data.tags["mlflow.parentRunId"] == by_name["h1"].info.run_id
    assert by_name["h1"].data.tags["mlflow.parentRunId"] == state.parent_run
    assert {"phase", "generation", "checkpoint"} <= set(trial.data.tags)
    assert "decoding.temperature" in trial.data.params and "limits.max_turns" in trial.data.params
    if trial.data.tags["state"] == "COMPLETE":
        assert {"pass_at_1", "ci_low", "ci_high", "mean_reward", "mean_turns", "format_error_rate", "timeouts",
                "mean_tokens"} <= set(trial.data.metrics)
        assert any(k.startswith("family/") for k in trial.data.metrics)
        artifacts = {a.path for a in client.list_artifacts(trial.info.run_id)}
        assert {"harness.yaml", "rendered_prompts.md", "per_task.csv", "trajectories_sample.jsonl"} <= artifacts
    plots = {a.path for a in client.list_artifacts(by_name["h1"].info.run_id, "plots")}
    assert "plots/optimization_history.png" in plots
    parent = client.get_run(state.parent_run)
    assert "test/co-evolved/pass_at_1" in parent.data.metrics
    assert {"test_table.md", "plots"} <= {a.path for a in client.list_artifacts(state.parent_run)}


def test_compare_prints_the_variants_from_mlflow(finished_run):
    config, _ = finished_run
    out = subprocess.run([sys.executable, "-m", "coevo.cli", "compare", str(config.run_dir), "--json"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    rows = json.loads(out)
    assert rows[0]["pass_at_1"] == max(r["pass_at_1"] or 0 for r in rows)
    assert {"h1 #0", "baseline"} <= {r["run"] for r in rows}
    assert all(r["differs"] for r in rows if r["run"].startswith("h1 #") and r["state"] != "FAIL")


def test_a_failing_trial_is_recorded_and_the_study_goes_on(suite, tmp_path):
    """bash_block with the file tools on is not a valid harness: the trial scores 0 with its cause."""
    import optuna
    from mlflow import MlflowClient

    from coevo.search.config import load_config
    from coevo.search.run import Search

    (tmp_path / "extra").mkdir()
    config = load_config(write_config(tmp_path, suite, name="failing", schedule="h", plan={
        "trials": 2, "dev_tasks": 4, "batches": 1, "test_tasks": 2}))
    space = SMALL_SPACE + "tools.read_file.enabled: {type: categorical, choices: [false, true]}\n"
    Path(config.space).write_text(space)
    storage = f"sqlite:///{config.run_dir / 'optuna.db'}"
    config.run_dir.mkdir(parents=True)
    study = optuna.create_study(study_name="failing.h1", storage=storage, direction="maximize")
    study.enqueue_trial({"action_format.kind": "bash_block", "tools.read_file.enabled": True})
    state = Search(config, log=lambda line: None).run()
    trial = optuna.load_study(study_name="failing.h1", storage=storage).trials[0]
    assert trial.state.name == "COMPLETE" and trial.value == 0.0
    assert "bash_block' can express only the bash and submit tools" in trial.user_attrs["error"]
    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    run = client.search_runs([client.get_experiment_by_name("failing").experiment_id], "tags.trial = '0'")[0]
    assert run.info.status == "FAILED" and "can express only the bash" in run.data.tags["error"]
    assert state.done  # the study went on and the run finished


def test_a_failing_grpo_phase_keeps_the_weights_and_the_search_goes_on(suite, tmp_path):
    from mlflow import MlflowClient

    from coevo.search.config import load_config
    from coevo.search.run import Search

    config = load_config(write_config(tmp_path, suite, name="badtrain", schedule="h -> w", train={
        "tasks_per_step": 500}, plan={"trials": 1, "dev_tasks": 4, "batches": 1, "test_tasks": 2, "top_k": 1}))
    lines = []
    state = Search(config, log=lines.append).run()
    assert state.done and len(state.checkpoints) == 2 and state.checkpoints[1] == state.checkpoints[0]
    assert any("w1: GRPO failed" in line and "tasks_per_step=500" in line for line in lines)
    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("badtrain").experiment_id], max_results=100)
    w1 = next(r for r in runs if r.info.run_name == "w1")
    assert "tasks_per_step=500" in w1.data.tags["error"]


def _trials(db: Path, study: str) -> list[tuple[int, str, int]]:
    """(number, state, intermediate values reported) per trial, read straight from the sqlite file."""
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return con.execute(
                "SELECT t.number, t.state, (SELECT COUNT(*) FROM trial_intermediate_values v WHERE v.trial_id = "
                "t.trial_id) FROM trials t JOIN studies s ON t.study_id = s.study_id WHERE s.study_name = ? "
                "ORDER BY t.number", (study,)).fetchall()
    except sqlite3.OperationalError:  # tables not created yet
        return []


def test_kill_minus_9_then_resume_keeps_finished_work_and_retries_the_killed_trial(suite, tmp_path):
    import optuna
    from mlflow import MlflowClient

    config_path = write_config(tmp_path, suite, name="killed", schedule="h", pruning=False, plan={
        "trials": 5, "dev_tasks": 6, "batches": 2, "test_tasks": 3})
    run_dir = tmp_path / "runs" / "killed"
    db = run_dir / "optuna.db"
    cmd = [sys.executable, "-m", "coevo.cli", "search"]
    proc = subprocess.Popen([*cmd, str(config_path)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:  # kill in the middle of a trial, after two have finished
            rows = _trials(db, "killed.h1")
            if [s for _, s, _ in rows].count("COMPLETE") >= 2 and any(s == "RUNNING" and n for _, s, n in rows):
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            time.sleep(0.1)
        else:
            pytest.fail("no trial was running in time")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed = next(number for number, state, _ in _trials(db, "killed.h1") if state == "RUNNING")
    weights = run_dir / "model" / "model.safetensors"  # the generation-0 checkpoint
    stamp = weights.stat().st_mtime_ns
    study = optuna.load_study(study_name="killed.h1", storage=f"sqlite:///{db}")
    done = {t.number: (t.params, t.value) for t in study.trials if t.state.name == "COMPLETE"}

    result = subprocess.run([*cmd, "--resume", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "marked" in result.stdout and "left RUNNING as KILLED" in result.stdout
    assert weights.stat().st_mtime_ns == stamp  # the checkpoint was kept, not rebuilt
    study = optuna.load_study(study_name="killed.h1", storage=f"sqlite:///{db}")
    trials = {t.number: t for t in study.trials}
    for number, (params, value) in done.items():  # finished trials untouched
        assert trials[number].params == params and trials[number].value == value
    assert trials[killed].state.name == "FAIL"
    retry = next(t for t in study.trials if t.system_attrs.get("failed_trial") == killed)
    assert retry.state.name == "COMPLETE" and retry.params == trials[killed].params
    assert sum(t.state.name == "COMPLETE" for t in study.trials) == 5
    client = MlflowClient(f"sqlite:///{run_dir / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("killed").experiment_id], max_results=500)
    status = {r.info.run_name: r.info.status for r in runs}
    assert status[f"h1 #{killed}"] == "KILLED" and status[f"h1 #{retry.number}"] == "FINISHED"
    assert status["search killed"] == "FINISHED" and status["h1"] == "FINISHED"
    assert json.loads((run_dir / "state.json").read_text())["done"]


def test_export_bundle_reloads_and_reproduces_its_score(finished_run, tmp_path):
    from coevo.evaluate import evaluate
    from coevo.search.export import load_bundle
    from coevo.search.synthetic import HarnessSensitivePolicy
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
    assert "decoding.temperature" in params and "action_format.kind" in params
    complete = [r for r in trials if {t["key"]: t["value"] for t in r["data"]["tags"]}.get("state") == "COMPLETE"]
    metrics = {m["key"] for m in complete[0]["data"]["metrics"]}
    assert {"pass_at_1", "ci_low", "ci_high"} <= metrics


def test_a_second_worker_joins_the_harness_phase_on_the_shared_storage(suite, tmp_path):
    import optuna

    # A long grace period: the first worker is paused below and must not look dead meanwhile.
    config_path = write_config(tmp_path, suite, name="shared", pruning=False, grace_period=600, plan={
        "trials": 10, "dev_tasks": 6, "batches": 1, "test_tasks": 3})
    run_dir = tmp_path / "runs" / "shared"
    db = run_dir / "optuna.db"
    cmd = [sys.executable, "-m", "coevo.cli", "search"]
    main = subprocess.Popen([*cmd, str(config_path)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    worker = None

    def complete() -> int:
        return sum(state == "COMPLETE" for _, state, _ in _trials(db, "shared.h1"))

    try:
        deadline = time.monotonic() + 180
        while not complete():
            assert main.poll() is None and time.monotonic() < deadline, main.stderr.read().decode()[-3000:]
            time.sleep(0.2)
        # Pause the first worker: what completes meanwhile is the joiner's, whatever the machine's load.
        os.kill(main.pid, signal.SIGSTOP)
        before = complete()
        worker = subprocess.Popen([*cmd, "--join", str(run_dir)], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 240
        while complete() == before and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        joined_alone = complete() - before
        os.kill(main.pid, signal.SIGCONT)
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err[-3000:]
        assert main.wait(300) == 0
    finally:
        for process in (main, worker):
            if process is not None and process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
    ran = int(out.split("ran ")[1].split()[0])
    study = optuna.load_study(study_name="shared.h1", storage=f"sqlite:///{db}")
    finished = [t for t in study.trials if t.state.name == "COMPLETE"]
    # The joiner completed trials while the first worker was paused, and both kept to one shared budget
    # (at most one over: the trial each was running when the budget filled).
    assert joined_alone >= 1 and ran >= joined_alone
    assert 10 <= len(finished) <= 11
    assert json.loads((run_dir / "state.json").read_text())["done"]
