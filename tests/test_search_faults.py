"""`coevo search` under faults: a failing trial, a failing GRPO phase, kill -9 and resume, and a second
worker joining a running study. Real sqlite Optuna storage, real MLflow store, real sandboxes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from search_helpers import ROOT, SMALL_SPACE, claim_race, study_trials, write_config


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


def _pause_between_writes(pid: int, stores: list[Path]) -> None:
    """SIGSTOP a worker at a moment it holds no lock on the run's sqlite stores.

    A worker stopped mid-write would hold its lock for as long as it is stopped, and every other worker's
    write would wait on it, then fail with "database is locked": a hang, not what the test is about.
    """
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        try:
            for store in stores:
                con = sqlite3.connect(store, timeout=0.2, isolation_level=None)
                try:
                    con.execute("BEGIN EXCLUSIVE")
                    con.execute("ROLLBACK")
                finally:
                    con.close()
            return
        except sqlite3.OperationalError:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)
    raise TimeoutError(f"{stores}: never free of the worker's locks")


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
            rows = study_trials(db, "killed.h1")
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
    killed = next(number for number, state, _ in study_trials(db, "killed.h1") if state == "RUNNING")
    weights = run_dir / "model" / "model.safetensors"  # the generation-0 checkpoint
    stamp = weights.stat().st_mtime_ns
    study = optuna.load_study(study_name="killed.h1", storage=f"sqlite:///{db}")
    done = {t.number: (t.params, t.value) for t in study.trials if t.state.name == "COMPLETE"}

    result = subprocess.run([*cmd, "--resume", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    log = (run_dir / "search.log").read_text()  # the killed run's lines, then the resumed run's
    assert "marked" in log and "left RUNNING as KILLED" in log and "marked" in result.stderr
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
        return sum(state == "COMPLETE" for _, state, _ in study_trials(db, "shared.h1"))

    try:
        deadline = time.monotonic() + 180
        while not complete():
            assert main.poll() is None and time.monotonic() < deadline, main.stderr.read().decode()[-3000:]
            time.sleep(0.2)
        # Pause the first worker: what completes meanwhile is the joiner's, whatever the machine's load.
        _pause_between_writes(main.pid, [db, run_dir / "mlflow.db"])
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


def test_an_enqueued_trial_is_claimed_by_exactly_one_worker_on_sqlite(tmp_path):
    # sqlite ignores SELECT ... FOR UPDATE: before the claim was one conditional UPDATE, every round here
    # had several winners, and in a run two workers ran one focused trial (the second could not tell it).
    assert claim_race(f"sqlite:///{tmp_path / 'optuna.db'}") == [1] * 10


def test_a_run_that_stops_on_an_error_keeps_its_traceback_and_says_how_to_resume(tmp_path):
    from coevo.search.cli import crash_report

    def robustness_table():
        return {"agent_settings": {}}["model_settings"]  # the KeyError a native search once stopped on

    try:
        robustness_table()
    except KeyError as e:
        message = crash_report(e, tmp_path / "runs" / "native")
    log = (tmp_path / "runs" / "native" / "crash.log").read_text()
    assert log.startswith("Traceback") and "robustness_table" in log and "KeyError: 'model_settings'" in log
    assert message.startswith("the search stopped: KeyError: 'model_settings'")
    assert f"coevo search --resume {tmp_path / 'runs' / 'native'}" in message and str(tmp_path / "runs") in message


def test_a_damaged_state_json_is_refused_naming_the_file(tmp_path):
    """benchmarks/faults.py cuts a finished run's state.json and resumes it through the CLI."""
    from coevo.search.errors import SearchError
    from coevo.search.state import RunState, load_state, save_state

    path = tmp_path / "state.json"
    save_state(path, RunState(phases_done=2, done=True))
    assert load_state(path).phases_done == 2
    path.write_text(path.read_text()[:40])
    with pytest.raises(SearchError, match=r"state\.json: damaged \(.*\); coevo writes it whole"):
        load_state(path)


def test_a_final_table_written_before_it_was_typed_still_loads_and_prints(tmp_path):
    """state.json files from before the final table's rows and verdict were typed held plain dicts (a row's
    `key` among them) and `{}` for no verdict: `coevo report` and `--resume` must still read them."""
    import json

    from coevo.search.final_table import _ci, verdict
    from coevo.search.state import load_state

    row = {"overrides": {"format.kind": "json"}, "checkpoint": "g0", "generation": 0, "source": "h1 #2",
           "score": 0.5, "pass_at_1": 0.25, "ci_low": 0.0, "ci_high": 0.5, "per_task": {"a": 0.5, "b": 0.5},
           "key": "('format.kind', 'json'), 'g0'", "mean_reward": 0.5, "mean_turns": 2.0, "episodes": 2,
           "gain": 0.1, "gain_low": 0.0, "gain_high": 0.2,
           "held_out": {"per_task": {"c": 1.0}, "score": 1.0, "pass_at_1": 1.0, "episodes": 1}}
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"test": {"harness-only": row}, "verdict": {}}))
    state = load_state(path)
    assert state.verdict is None and state.test["harness-only"].held_out.per_task == {"c": 1.0}
    assert _ci(state.test["harness-only"]) == "0.250 [0.000, 0.500]"
    assert state.test["harness-only"].key == repr(([("format.kind", "json")], "g0"))
    path.write_text(json.dumps({"verdict": {"effects": {"delta_h": [0.1, 0.0, 0.2]}, "versus": {}}}))
    assert verdict(load_state(path).verdict, "reward") == "No verdict: the fair single-lever arms did not run."


def test_a_trial_killed_before_its_first_heartbeat_is_failed_and_retried_not_waited_on_for_ever(tmp_path):
    """The owner SIGKILLed right as a trial started (benchmarks/faults.py, phase h1) left it RUNNING with no
    heartbeat; Optuna never fails such a trial, and the resumed phase waited on it for ever."""
    import optuna

    from coevo.search.study import make_storage, wait_running

    storage = make_storage(f"sqlite:///{tmp_path / 'optuna.db'}", 1, 2)
    study = optuna.create_study(storage=storage, study_name="h1")
    orphan = study.ask({"x": optuna.distributions.IntDistribution(0, 9)})  # ask() starts no heartbeat
    started = time.monotonic()
    wait_running(study, 2)
    assert time.monotonic() - started < 30
    trials = study.get_trials()
    assert trials[orphan.number].state.name == "FAIL"
    assert [t.state.name for t in trials[1:]] == ["WAITING"] and trials[1].params == orphan.params  # its retry
