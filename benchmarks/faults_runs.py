"""Faults of whole processes, for benchmarks/faults.py: the search owner SIGKILLed in each phase and resumed,
a worker SIGKILLed mid-trial, the Optuna database and the MLflow server restarted mid-phase, the trainer
SIGKILLed mid-step and mid-checkpoint-write, `coevo serve` SIGKILLed mid-stream, the disk full under a
checkpoint and under MLflow's artifacts, a damaged state.json. What finished before a fault is read
straight from the stores (optuna.db, mlflow.db, state.json, checkpoint files) and compared after the run."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from fault_kit import REPO, Env, Row, coevo, coevo_run, no_traceback, sigkill, tail, wait_for

FAULTS = []


def fault(function):
    FAULTS.append(function)
    return function


# -- what a run has finished, read from its stores ------------------------------------------------------
def _sqlite(db: Path, query: str, args: tuple = ()) -> list[tuple]:
    if not db.exists():
        return []
    for _ in range(100):
        try:
            with sqlite3.connect(db, timeout=5) as con:
                return con.execute(query, args).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return []
            time.sleep(0.1)
    raise TimeoutError(f"{db}: locked")


def _state(run_dir: Path) -> dict:
    for _ in range(20):
        try:
            return json.loads((run_dir / "state.json").read_text())
        except FileNotFoundError:
            return {}
        except json.JSONDecodeError:
            time.sleep(0.05)
    return {}


@dataclass
class Finished:
    """The finished work of a run at one moment."""

    trials: dict[tuple[str, int], float] = field(default_factory=dict)
    running: list[str] = field(default_factory=list)
    mlflow: dict[str, str] = field(default_factory=dict)
    traces: set[str] = field(default_factory=set)
    checkpoints: dict[str, int] = field(default_factory=dict)
    progress: tuple = ()

    @classmethod
    def read(cls, run_dir: Path, storage=None) -> Finished:
        if storage is None:
            rows = _sqlite(run_dir / "optuna.db", "SELECT s.study_name, t.number, t.state, v.value FROM trials t JOIN "
                           "studies s ON t.study_id = s.study_id LEFT JOIN trial_values v ON v.trial_id = t.trial_id")
        else:
            rows = [(s.study_name, t.number, t.state.name, t.value) for s in storage.get_all_studies()
                    for t in storage.get_all_trials(s._study_id, deepcopy=False)]
        trials = {(s, n): v for s, n, state, v in rows if state == "COMPLETE"}
        running = [f"{s} #{n}" for s, n, state, _ in rows if state == "RUNNING"]
        runs = dict(_sqlite(run_dir / "mlflow.db", "SELECT run_uuid, status FROM runs"))
        traces = {r for (r,) in _sqlite(run_dir / "mlflow.db", "SELECT request_id FROM trace_info")}
        state = _state(run_dir)
        checkpoints = {}
        for path in state.get("checkpoints", []):
            weights = Path(path) / "model.safetensors"
            checkpoints[path] = weights.stat().st_mtime_ns if weights.exists() else -1
        progress = (state.get("phases_done", 0), len(state.get("steps", [])), len(trials), len(state.get("history", [])),
                    len(state.get("arms", {})), len(state.get("test", {})), len(checkpoints), int(state.get("done", False)))
        return cls(trials, running, {k: v for k, v in runs.items() if v == "FINISHED"}, traces, checkpoints, progress)

    def lost_since(self, before: Finished) -> list[str]:
        """Finished work of `before` that is gone or changed now."""
        lost = [f"trial {s} #{n}" for (s, n), v in before.trials.items() if self.trials.get((s, n)) != v]
        lost += [f"MLflow run {r[:8]} (was FINISHED)" for r in before.mlflow if r not in self.mlflow]
        lost += [f"{len(before.traces - self.traces)} trace(s)"] if before.traces - self.traces else []
        lost += [f"checkpoint {Path(p).name} ({'gone' if p not in self.checkpoints else 'rewritten'})"
                 for p, t in before.checkpoints.items() if self.checkpoints.get(p) != t]
        return lost

    def advanced(self, before: Finished) -> bool:
        return any(a > b for a, b in zip(self.progress, before.progress, strict=True))


def current_phase(run_dir: Path) -> str | None:
    """The newest phase whose MLflow run is open, by order of the schedule and the end phases."""
    state = _state(run_dir)
    opened = [p for p in state.get("phase_runs", {})]
    return opened[-1] if opened else None


# -- the search owner, killed in each phase ---------------------------------------------------------------
def tiny_search_config(env: Env, folder: Path, name: str) -> Path:
    """w0 -> h -> w with the tiny model and the fair arms: every phase of a real search, in a few minutes."""
    (folder / "space.yaml").write_text("limits.max_turns: {type: int, low: 2, high: 3}\n"
                                       "templates.system: {type: categorical, choices: [system_terse.j2, "
                                       "system_verbose.j2]}\n")
    config = {"name": name, "tasks": str(env.suite), "harness": str(REPO / "harnesses" / "mini_bash.yaml"),
              "space": str(folder / "space.yaml"), "runs_dir": str(folder / "runs"), "schedule": "w0 -> h -> w",
              "overrides": {"limits.max_turns": 2, "limits.max_tokens_per_turn": 48}, "pruning": False,
              "train": {"tasks_per_step": 2, "group_size": 2}, "heartbeat_interval": 1, "grace_period": 3,
              "plan": {"trials": 2, "dev_tasks": 4, "batches": 1, "train_tasks": 2, "warmstart_epochs": 1,
                       "warmstart_augment": 0, "warmstart_harnesses": 0, "grpo_steps": 2, "top_k": 1},
              "splits": {"promotion": 4, "test": 6}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _in_phase(run_dir: Path, phase: str, seconds: float, extra=lambda: True):
    """A condition: `phase` is the current phase, has been for `seconds` (as seen by this poller), and `extra`."""
    seen: list[float] = []

    def condition() -> bool:
        if current_phase(run_dir) != phase:
            return False
        seen.append(seen[0] if seen else time.monotonic())
        return time.monotonic() - seen[0] >= seconds and extra()

    return condition


@fault
def search_owner_killed_in_each_phase(env: Env) -> list[Row]:
    folder = env.folder("owner")
    config = tiny_search_config(env, folder, "owner")
    run_dir = folder / "runs" / "owner"
    db = run_dir / "optuna.db"

    def h1_trial_running() -> bool:
        rows = _sqlite(db, "SELECT t.state FROM trials t JOIN studies s ON t.study_id = s.study_id "
                           "WHERE s.study_name = 'owner.h1'")
        states = [s for (s,) in rows]
        return states.count("COMPLETE") >= 1 and "RUNNING" in states

    kills = [("w0", _in_phase(run_dir, "w0", 8)), ("h1", _in_phase(run_dir, "h1", 0, h1_trial_running)),
             ("w1", _in_phase(run_dir, "w1", 4)), ("arms", _in_phase(run_dir, "arms", 2)),
             ("test", _in_phase(run_dir, "test", 1))]
    process = coevo("search", str(config), log=folder / "owner.log")
    pending = []
    try:
        for phase, condition in kills:
            try:
                wait_for(condition, 900, f"phase {phase}", process, every=0.1)
            except RuntimeError:  # finished (or stopped) before the phase could be caught
                pending.append((phase, None, None, f"not injected: {tail(process, 300)}"))
                break
            before = Finished.read(run_dir)
            killed_at = sigkill(process)
            process = coevo("search", "--resume", str(run_dir), log=folder / "owner.log")
            try:
                wait_for(lambda before=before: Finished.read(run_dir).advanced(before), 600,
                         f"progress after the kill in {phase}", process)
                recover = time.monotonic() - killed_at
            except (RuntimeError, TimeoutError) as e:
                recover = None
                pending.append((phase, before, recover, str(e)[-300:]))
                continue
            pending.append((phase, before, recover, f"in flight: {', '.join(before.running) or 'phase ' + phase}"))
        code = process.wait(900)
    finally:
        if process.poll() is None:
            sigkill(process)
    after = Finished.read(run_dir)
    done = bool(_state(run_dir).get("done")) and code == 0
    rows = []
    for phase, before, recover, note in pending:
        lost = after.lost_since(before) if before else ["?"]
        rows.append(Row(f"SIGKILL of the search owner in {phase}", f"coevo search (tiny model), phase {phase}, then "
                        "--resume", done and not lost and before is not None, ", ".join(lost) or "nothing",
                        recover, note if done else f"{note}; the run did not finish: {tail(folder / 'owner.log', 300)}"))
    return rows


# -- scale-out: a worker killed, the database and the tracking server restarted --------------------------------
class Servers:
    """A PostgreSQL cluster and an MLflow server on it (tests/servers.py) whose server can restart on its port."""

    def __init__(self, folder: Path):
        import servers

        self.cluster = servers.PostgresCluster()
        self.artifacts = folder / "mlflow-artifacts"
        self.mlflow = servers.MlflowServer(self.cluster.url("mlflow"), self.artifacts)

    def restart_mlflow(self) -> None:
        import servers

        port = self.mlflow.port
        self.mlflow.close()
        free_port, servers.free_port = servers.free_port, lambda: port
        try:
            self.mlflow = servers.MlflowServer(self.cluster.url("mlflow"), self.artifacts)
        finally:
            servers.free_port = free_port

    def close(self) -> None:
        try:
            self.mlflow.close()
        finally:
            self.cluster.close()


@fault
def scale_out_faults(env: Env) -> list[Row]:
    from search_helpers import write_config

    from coevo.search.study import make_storage

    folder = env.folder("scale")
    found = Servers(folder)
    try:
        config = write_config(folder, env.suite, name="scale", pruning=False, arms=False, grace_period=5,
                              storage=found.cluster.url(), tracking_uri=found.mlflow.url, model=str(folder),
                              plan={"trials": 12, "dev_tasks": 6, "batches": 2, "test_tasks": 3},
                              splits={"promotion": 6, "test": 6})
        storage = make_storage(found.cluster.url(), 1, 60)
        run_dir = folder / "runs" / "scale"

        def trials():
            import optuna

            try:
                return optuna.load_study(study_name="scale.h1", storage=storage).get_trials()
            except KeyError:
                return []

        def complete() -> int:
            return sum(t.state.name == "COMPLETE" for t in trials())

        worker = coevo("search", str(config), "--worker", log=folder / "worker.log")
        owner = coevo("search", str(config), log=folder / "owner.log")
        rows = []
        # 1. the worker, SIGKILLed mid-trial
        victim = wait_for(lambda: next((t for t in trials() if t.state.name == "RUNNING" and
                                        t.user_attrs.get("worker", "").endswith(f":{worker.pid}")), None),
                          300, "a trial of the worker", owner)
        before, n_before = {t.number: t.value for t in trials() if t.state.name == "COMPLETE"}, complete()
        killed_at = sigkill(worker)
        wait_for(lambda: complete() > n_before, 300, "a trial after the kill", owner)
        worker_recover = time.monotonic() - killed_at
        # 2. the database, stopped for 3 s mid-phase
        n_before = complete()
        found.cluster.stop()
        stopped_at = time.monotonic()
        time.sleep(3)
        found.cluster.start()
        wait_for(lambda: complete() > n_before, 300, "a trial after the database restart", owner)
        db_recover = time.monotonic() - stopped_at
        # 3. the MLflow server, restarted mid-phase
        n_before = complete()
        mlflow_at = time.monotonic()
        found.restart_mlflow()
        wait_for(lambda: complete() > n_before, 300, "a trial after the MLflow restart", owner)
        mlflow_recover = time.monotonic() - mlflow_at
        code = owner.wait(600)
        final = trials()
        done = code == 0 and bool(_state(run_dir).get("done"))
        by_number = {t.number: t for t in final}
        kept = [n for n, v in before.items() if by_number[n].value != v or by_number[n].state.name != "COMPLETE"]
        retries = [t for t in final if t.system_attrs.get("failed_trial") == victim.number]
        errors = [t.number for t in final if "error" in t.user_attrs]
        failed = [t.number for t in final if t.state.name == "FAIL"]
        from mlflow import MlflowClient

        client = MlflowClient(found.mlflow.url)
        experiment = client.get_experiment_by_name("scale").experiment_id
        statuses = {r.info.run_name: r.info.status for r in client.search_runs([experiment], max_results=500)}
        rows.append(Row("SIGKILL of a worker mid-trial", "coevo search --worker (PostgreSQL + MLflow server)",
                        done and not kept and by_number[victim.number].state.name == "FAIL"
                        and len(retries) == 1 and _kept_params(by_number[victim.number], retries[0])
                        and statuses.get(f"h1 #{victim.number}") == "KILLED",
                        ", ".join(f"trial #{n}" for n in kept) or "nothing", worker_recover,
                        f"in flight: trial #{victim.number} -> FAIL (MLflow run "
                        f"{statuses.get(f'h1 #{victim.number}')}), re-run as {[t.number for t in retries]}; its "
                        f"{len(by_number[victim.number].params)} drawn parameters kept: "
                        f"{bool(retries) and _kept_params(by_number[victim.number], retries[0])}"))
        rows.append(Row("Optuna database (PostgreSQL) stopped 3 s and restarted mid-phase", "pg_ctl stop/start under "
                        "an owner and a worker", done and not errors and failed == [victim.number], "nothing",
                        db_recover, f"trials scored 0 for it: {errors}; FAIL trials: {failed} (the killed worker's)"))
        rows.append(Row("MLflow tracking server restarted mid-phase", "mlflow server killed and started on its port",
                        done and not errors and all(s != "RUNNING" for s in statuses.values()), "nothing",
                        mlflow_recover, f"{len(statuses)} MLflow runs, none left RUNNING; "
                        f"{sum(t.state.name == 'COMPLETE' for t in final)} trials complete of a budget of 12"))
        return rows
    finally:
        for p in ("worker", "owner"):
            process = locals().get(p)
            if process is not None and process.poll() is None:
                sigkill(process)
        found.close()


def _kept_params(killed, retry) -> bool:
    """The retry re-used every parameter the killed trial had drawn (as stored at its death: seen RUNNING,
    a trial may not have drawn them all yet, and the retry then draws the rest)."""
    return all(retry.params.get(k) == v for k, v in killed.params.items())


# -- the trainer, killed mid-checkpoint-write and mid-step --------------------------------------------------------
COIN_TEST = "#!/bin/bash\nprintf '{\"a\": 0.%05d, \"b\": 0.%05d}' $RANDOM $RANDOM > /logs/verifier/reward.json\n"


def train_command(env: Env, folder: Path, out: Path, steps: int) -> list[str]:
    """`coevo train` of the tiny model on tasks whose verifiers pay random partial credit, so that GRPO always
    has a signal (as tests/test_grpo.py), with short episodes."""
    from conftest import write_task

    from coevo.harness import load_harness

    harness, tasks = folder / "h.yaml", folder / "coin"
    if not harness.exists():
        harness.write_text(load_harness(REPO / "harnesses" / "mini_bash.yaml").with_overrides(
            {"limits.max_tokens_per_turn": 16, "limits.max_turns": 2}).to_yaml())
        for i in range(4):
            write_task(tasks, f"coin-{i}", test_sh=COIN_TEST, instruction=f"Write {40 + i} to /app/answer.txt.\n")
    return ["train", "--model", str(env.tiny), "--harness", str(harness), "--tasks", str(tasks), "--split", "all",
            "--out", str(out), "--steps", str(steps), "--group-size", "2", "--tasks-per-step", "2", "--reward",
            "partial"]


def _published(out: Path) -> list[int]:
    folder = out / "checkpoints"
    return sorted(int(p.name.split("-")[1]) for p in folder.glob("checkpoint-*")) if folder.is_dir() else []


def _complete(out: Path) -> list[str]:
    """Published checkpoints that are not whole (each must hold its own step's state and weights)."""
    bad = []
    for step in _published(out):
        ckpt = out / "checkpoints" / f"checkpoint-{step}"
        try:
            whole = json.loads((ckpt / "trainer_state.json").read_text())["global_step"] == step and all(
                (ckpt / f).is_file() for f in ("model.safetensors", "optimizer.pt", "coevo_checkpoint.json"))
        except (OSError, ValueError, KeyError):
            whole = False
        if not whole:
            bad.append(ckpt.name)
    return bad


@fault
def trainer_killed(env: Env) -> list[Row]:
    folder = env.folder("trainer")
    out = folder / "run"
    command = train_command(env, folder, out, 4)
    process = coevo(*command, log=folder / "train.log")
    rows = []
    try:
        # 1. mid-checkpoint-write: the Trainer is writing into .staging/checkpoint-N
        wait_for(lambda: any((out / ".staging").glob("checkpoint-*")), 600, "a checkpoint being written", process,
                 every=0.005)
        published = _published(out)
        killed_at = sigkill(process)
        staged = sorted(p.name for p in (out / ".staging").glob("checkpoint-*"))
        half = _complete(out)
        process = coevo(*command, "--resume", log=folder / "train.log")
        wait_for(lambda: len(_published(out)) > len(published) or max(_published(out) or [0]) > max(published or [0]),
                 600, "a checkpoint after the kill", process)
        recover_write = time.monotonic() - killed_at
        # 2. mid-step: a checkpoint was just published, the next step's rollouts are running
        wait_for(lambda: not any((out / ".staging").glob("checkpoint-*")), 60, "no checkpoint in flight", process,
                 every=0.05)
        time.sleep(1.0)
        published2 = _published(out)
        killed_step_at = sigkill(process)
        process = coevo(*command, "--resume", log=folder / "train.log")
        wait_for(lambda: max(_published(out) or [0]) > max(published2 or [0]), 600, "a step after the kill", process)
        recover_step = time.monotonic() - killed_step_at
        code = process.wait(600)
    finally:
        if process.poll() is None:
            sigkill(process)
    metrics = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] \
        if (out / "metrics.jsonl").exists() else []
    finished = code == 0 and max(_published(out) or [0]) == 4 and metrics == [1, 2, 3, 4] and not _complete(out)
    rows.append(Row("SIGKILL of the trainer mid-checkpoint-write", "coevo train (TRL GRPO), .staging being written",
                    finished and not half, "nothing" if not half else f"half-published: {half}", recover_write,
                    f"published before: {published}, staging at the kill: {staged}; in flight: the staged checkpoint "
                    "(cleared, its step redone)"))
    rows.append(Row("SIGKILL of the trainer mid-step", "coevo train (TRL GRPO), rollouts of the next step",
                    finished, "nothing", recover_step,
                    f"published before: {published2}; metrics steps after the resume: {metrics}; in flight: one step"))
    return rows


# -- coevo serve, killed mid-stream ---------------------------------------------------------------------------------
def _serve(env: Env, folder: Path, port: int):
    process = coevo("serve", str(env.tiny), "--port", str(port), "--name", "tiny", "--threads", "1",
                    "--sessions-dir", str(folder / "sessions"), log=folder / "serve.log")
    import urllib.request

    def ready():
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).status == 200
        except OSError:
            return False

    wait_for(ready, 180, "coevo serve", process)
    return process


def _post(url: str, body: dict, timeout: float = 60):
    import urllib.request

    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=timeout)


def _session(url: str) -> dict | None:
    import urllib.request

    try:
        return json.loads(urllib.request.urlopen(url, timeout=10).read())
    except OSError:  # 404: the server does not know it
        return None


@fault
def serve_killed_mid_stream(env: Env) -> list[Row]:
    from servers import free_port

    folder = env.folder("serve")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = _serve(env, folder, port)
    messages = [{"role": "user", "content": "list the files in /app"}]
    try:
        _post(f"{base}/sessions/ep1/v1/chat/completions", {"model": "tiny", "messages": messages, "max_tokens": 8}).read()
        stream = _post(f"{base}/v1/chat/completions", {"model": "tiny", "messages": messages, "max_tokens": 2000,
                                                         "stream": True, "temperature": 1.0})
        stream.readline()
        killed_at = sigkill(process)
        client_error = None
        try:
            while stream.readline():
                pass
        except OSError as e:
            client_error = type(e).__name__
        told = time.monotonic() - killed_at
        process = _serve(env, folder, port)
        reply = json.loads(_post(f"{base}/v1/chat/completions", {"model": "tiny", "messages": messages,
                                                                  "max_tokens": 8}).read())
        recover = time.monotonic() - killed_at
        session = _session(f"{base}/sessions/ep1")
    finally:
        if process.poll() is None:
            sigkill(process)
    kept = session is not None and len(session["trajectories"]) == 1 and session["trajectories"][0]["turns"] == 1
    ok = told < 10 and bool(reply.get("choices")) and kept
    return [Row("SIGKILL of coevo serve mid-stream, then restarted", "coevo serve --sessions-dir (tiny model), a "
                "streamed reply", ok, "in flight: the streamed reply" if kept else
                "in flight: the streamed reply; the recorded session ep1", recover,
                f"the client's stream ended {told:.1f} s after the kill ({client_error or 'closed'}); after the "
                f"restart a reply came ({len(reply.get('choices', []))} choice); session ep1 recorded before the kill: "
                f"{'kept (replayed from the journal)' if kept else 'gone'}")]


def _disk_errors(run_dir: Path) -> list[str]:
    """Trials of the run whose recorded error is a full disk."""
    rows = _sqlite(run_dir / "optuna.db", "SELECT s.study_name, t.number, a.value_json FROM trial_user_attributes a "
                   "JOIN trials t ON a.trial_id = t.trial_id JOIN studies s ON t.study_id = s.study_id "
                   "WHERE a.key = 'error'")
    return [f"{study} #{number}" for study, number, value in rows if "No space left" in value]


# -- the disk full -------------------------------------------------------------------------------------------------
def tmpfs(folder: Path, size: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)


def umount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


@fault
def disk_full(env: Env) -> list[Row]:
    rows = []
    folder = env.folder("disk")
    # 1. under a GRPO run's checkpoints
    out = folder / "train"
    tmpfs(out, "2m")
    try:
        command = train_command(env, folder, out, 2)
        first = coevo_run(*command)
        text = first.stdout + first.stderr
        clean = first.returncode != 0 and no_traceback(text) and "No space left" in text
        half = _complete(out)
        subprocess.run(["mount", "-o", "remount,size=512m", str(out)], check=True)
        freed_at = time.monotonic()
        again = coevo_run(*command, "--resume")
        recover = time.monotonic() - freed_at
        whole = again.returncode == 0 and _published(out)[-1:] == [2] and not _complete(out)
        rows.append(Row("disk full while writing a checkpoint (2 MB tmpfs)", "coevo train --out on the tmpfs, then "
                        "--resume once it has room", clean and not half and whole, "nothing" if not half else str(half),
                        recover, f"first run: exit {first.returncode}, "
                        f"{(text.strip().splitlines() or [''])[-1][:150]}; after room was made: exit {again.returncode}"
                        + ("" if whole else f" {(again.stderr or again.stdout)[-200:]}")))
    finally:
        umount(out)
    # 2. under MLflow's artifacts of a search
    from search_helpers import write_config

    config = write_config(folder, env.suite, name="full", pruning=False, arms=False, model=str(folder),
                          plan={"trials": 4, "dev_tasks": 6, "batches": 1, "test_tasks": 3},
                          splits={"promotion": 6, "test": 6})
    run_dir = folder / "runs" / "full"
    artifacts = run_dir / "mlartifacts"
    tmpfs(artifacts, "128k")  # a search's artifacts are a few hundred kB: it fills up mid-run
    try:
        first = coevo_run("search", str(config), timeout=900)
        before = Finished.read(run_dir)
        text = first.stdout + first.stderr
        hit = "No space left" in text or _disk_errors(run_dir)
        subprocess.run(["mount", "-o", "remount,size=512m", str(artifacts)], check=True)
        freed_at = time.monotonic()
        again = coevo_run("search", "--resume", str(run_dir), timeout=900) if first.returncode else first
        recover = time.monotonic() - freed_at
        after = Finished.read(run_dir)
        lost = after.lost_since(before) + [f"trial {t} scored 0 for the full disk" for t in _disk_errors(run_dir)]
        done = again.returncode == 0 and bool(_state(run_dir).get("done"))
        last = [line for line in text.splitlines() if "No space" in line][-2:] or ["(no 'No space left' seen)"]
        rows.append(Row("disk full while writing MLflow artifacts (128 kB tmpfs)", "coevo search, RUN/mlartifacts on "
                        "the tmpfs, then --resume once it has room", hit and done and not lost and no_traceback(text),
                        ", ".join(lost) or "nothing", recover if first.returncode else None,
                        f"first run: exit {first.returncode} {' / '.join(last)[:200]}; resumed: exit {again.returncode}"))
    finally:
        umount(artifacts)
    # 3. a damaged state.json on resume
    (run_dir / "state.json").write_text((run_dir / "state.json").read_text()[:200])
    damaged = coevo_run("search", "--resume", str(run_dir))
    text = damaged.stdout + damaged.stderr
    rows.append(Row("state.json damaged, then --resume", "coevo search --resume", damaged.returncode == 2 and
                    no_traceback(text) and "state.json" in text, "nothing (refused, the stores untouched)", None,
                    (text.strip().splitlines() or [""])[-1][:200]))
    return rows
