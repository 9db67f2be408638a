"""What the `coevo search` tests share: a small space over real harness fields and a config writer whose
policy is the synthetic harness-sensitive oracle (coevo/policy/synthetic.py); reading a run's stores as it
runs; and a search SIGKILLed at seeded random points of its phases and resumed (benchmarks/faults_runs.py
uses it too)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SMALL_SPACE = """
templates.system: {type: categorical, choices: [system_terse.j2, system_verbose.j2]}
action_format.kind: {type: categorical, choices: [json, bash_block]}
recovery.format_error_feedback: {type: categorical, choices: [true, false]}
recovery.max_format_retries: {type: int, low: 0, high: 3, when: {recovery.format_error_feedback: true}}
limits.max_turns: {type: int, low: 3, high: 8}
"""


NESTED_SPACE = """
templates.system: {type: categorical, choices: [system_terse.j2, system_verbose.j2]}
recovery.format_error_feedback: {type: categorical, choices: [true, false]}
"""
"""Two harness dimensions that change what the model sees (so the trials' fingerprints differ), and short
episodes: the tiny model scores every pair itself."""
NESTED_FIELDS = {"name": "nested", "schedule": "n", "policy": None, "train": {"sft_epochs": 1},
                 "overrides": {"limits.max_turns": 3, "limits.max_tokens_per_turn": 48},
                 "splits": {"promotion": 4, "test": 6, "held_out": 0},
                 "plan": {"trials": 3, "dev_tasks": 4, "batches": 2, "train_tasks": 3, "top_k": 2}}
"""A small nested search (schedule "n") whose every pair the tiny model, trained in the run, scores itself
(policy None): conftest's `nested_run` runs it once for the session."""


def tiny_coevolution_config(folder: Path, tasks: Path) -> Path:
    """The whole alternating loop on the real tiny model, kept small (few tasks, short episodes, one GRPO
    step): w0 (SFT) -> h (Optuna) -> w (TRL GRPO, then re-scoring), the fair arms and the final table.
    conftest's `tiny_coevolution` runs it once; tests/test_search_repeat.py runs it again to compare."""
    (folder / "space.yaml").write_text(
        "limits.max_turns: {type: int, low: 2, high: 3}\n"
        "templates.system: {type: categorical, choices: [system_terse.j2, system_verbose.j2]}\n"
        "train.learning_rate: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}\n")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({
        "name": "tiny", "tasks": str(tasks), "harness": str(ROOT / "harnesses" / "mini_bash.yaml"),
        "space": str(folder / "space.yaml"), "runs_dir": str(folder / "runs"), "schedule": "w0 -> h -> w",
        "overrides": {"limits.max_turns": 2, "limits.max_tokens_per_turn": 48},
        "train": {"tasks_per_step": 2, "group_size": 2},
        "plan": {"trials": 2, "dev_tasks": 4, "batches": 1, "train_tasks": 2, "warmstart_epochs": 1,
                 "warmstart_augment": 0, "grpo_steps": 1, "top_k": 1, "train_trials": 2},
        "splits": {"promotion": 6, "test": 8}}))
    return path


def write_config(folder: Path, suite: Path, **fields) -> Path:
    (folder / "space.yaml").write_text(SMALL_SPACE)
    config = {"tasks": str(suite), "harness": str(ROOT / "harnesses" / "terminus_json.yaml"),
              "space": str(folder / "space.yaml"), "runs_dir": str(folder / "runs"), "schedule": "h",
              "policy": {"backend": "synthetic"}, "heartbeat_interval": 1, "grace_period": 3,
              "plan": {"trials": 4, "dev_tasks": 8, "batches": 2}, "splits": {"promotion": 12, "test": 18},
              **fields}
    path = folder / f"{fields.get('name', 'search')}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def claim_race(url: str, contenders: int = 6, rounds: int = 10) -> list[int]:
    """Workers on one storage race to claim the same enqueued trial, as `study.optimize` does when several
    pick up a phase's focused trials at once; how many claimed it, per round (each should be 1)."""
    import threading

    import optuna
    from optuna.trial import TrialState

    from coevo.search.study import make_storage

    study = optuna.create_study(storage=make_storage(url, 1, 60), study_name="race")
    workers = [make_storage(url, 1, 60) for _ in range(contenders)]  # one connection pool per worker
    winners = []
    for _ in range(rounds):
        study.enqueue_trial({"x": 1})
        trial_id = study.get_trials(states=(TrialState.WAITING,))[0]._trial_id
        start, claimed = threading.Barrier(contenders), []

        def claim(storage, start=start, claimed=claimed, trial_id=trial_id):
            start.wait()
            claimed.append(storage.set_trial_state_values(trial_id, TrialState.RUNNING))

        threads = [threading.Thread(target=claim, args=(storage,)) for storage in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners.append(sum(claimed))
        study.tell(study.get_trials(states=(TrialState.RUNNING,))[0].number, 0.0)
    return winners


def _query(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    """Rows of `sql` on a run's sqlite store as it runs ([] before the search has created its tables)."""
    if not db.exists():
        return []
    for _ in range(50):
        try:
            with sqlite3.connect(db, timeout=5) as con:
                return con.execute(sql, args).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):  # the search has not created its tables yet
                return []
            time.sleep(0.1)  # locked by a worker's write: an empty answer here would read as trials lost
    raise TimeoutError(f"{db}: still locked after 50 tries")


def study_trials(db: Path, study: str) -> list[tuple[int, str, int]]:
    """(number, state, intermediate values reported) per trial, read straight from the sqlite file."""
    return _query(db, "SELECT t.number, t.state, (SELECT COUNT(*) FROM trial_intermediate_values v WHERE v.trial_id"
                  " = t.trial_id) FROM trials t JOIN studies s ON t.study_id = s.study_id WHERE s.study_name = ?"
                  " ORDER BY t.number", (study,))


def finished_trials(db: Path) -> dict[str, list[tuple]]:
    """Study -> its finished trials in order, each (state, value, params): what a resumed run must
    reproduce. A killed trial (FAIL) is left out; its retry takes its place."""
    params: dict[int, dict[str, float]] = {}
    for trial_id, name, value in _query(db, "SELECT trial_id, param_name, param_value FROM trial_params"):
        params.setdefault(trial_id, {})[name] = value
    studies: dict[str, list[tuple]] = {}
    for study, trial_id, state, value in _query(
            db, "SELECT s.study_name, t.trial_id, t.state, v.value FROM trials t JOIN studies s ON t.study_id = "
            "s.study_id LEFT JOIN trial_values v ON v.trial_id = t.trial_id WHERE t.state IN ('COMPLETE', 'PRUNED') "
            "ORDER BY s.study_name, t.number"):
        studies.setdefault(study, []).append((state, value, params.get(trial_id, {})))
    return studies


def final_table(state) -> dict:
    """The table's numbers and decisions, without run ids and paths (which differ between folders)."""
    rows = {row: {k: r[k] for k in ("per_task", "pass_at_1", "ci_low", "ci_high", "score", "generation",
                                      "overrides", "gain", "gain_low", "gain_high")} for row, r in state.test.items()}
    decisions = [{k: h[k] for k in ("phase", "challenger", "accepted", "gain", "wins", "losses", "ties")}
                 for h in state.history]
    return {"rows": rows, "verdict": state.verdict, "decisions": decisions}


# -- a search killed at seeded random points and resumed ----------------------------------------------------
ARMS = ("arm harness-only", "arm weights-only")


def run_phase(run_dir: Path) -> str:
    """The phase a run is in, as its state.json says: 'start' (generation 0 and its baseline, before the
    first phase opens), a schedule phase (w0, h1, n1, ...), one of ARMS, 'test', or 'done'."""
    for _ in range(20):  # written by rename, but a reader on another filesystem may still see it torn
        try:
            state = json.loads((run_dir / "state.json").read_text())
            break
        except FileNotFoundError:
            return "start"
        except json.JSONDecodeError:
            time.sleep(0.05)
    else:
        raise ValueError(f"{run_dir / 'state.json'}: not JSON")
    opened = list(state.get("phase_runs", {}))
    if state.get("done"):
        return "done"
    if not opened:
        return "start"
    if opened[-1] == "arms":
        return ARMS[0] if "harness-only" not in state.get("arms", {}) else ARMS[1]
    return opened[-1]


def running_trials(run_dir: Path) -> list[str]:
    """'study #number' of every trial RUNNING in the run's Optuna store."""
    return [f"{study} #{number}" for study, number in _query(
        run_dir / "optuna.db", "SELECT s.study_name, t.number FROM trials t JOIN studies s ON t.study_id = "
        "s.study_id WHERE t.state = 'RUNNING' ORDER BY s.study_name, t.number")]


def search_process(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`coevo search ARGS` in a session of its own (a kill of its group takes its sandboxes with it), its
    output appended to `log`; `env` is added to this process's environment."""
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "coevo.cli", "search", *args], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", **(env or {})})


def _log_size(run_dir: Path) -> int:
    log = run_dir / "search.log"
    return log.stat().st_size if log.exists() else 0


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.exists() else ""


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(30)


def timed_search(args: list[str], run_dir: Path, log: Path, timeout: float = 900) -> dict[str, float]:
    """`coevo search ARGS` straight through: each phase's wall seconds as polled from state.json, in the
    order they ran (from the run's first log line; 'done' last, 0), and 'all' (launch to exit)."""
    process, launched, seen = search_process(args, log), time.monotonic(), {}
    try:
        while process.poll() is None:
            if time.monotonic() - launched > timeout:
                raise TimeoutError(f"coevo search {' '.join(args)}: not done in {timeout:.0f} s")
            if _log_size(run_dir):
                seen.setdefault(run_phase(run_dir), time.monotonic())
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            _kill(process)
    if process.returncode:
        raise RuntimeError(f"coevo search {' '.join(args)}: exit {process.returncode}\n{_tail(log)}")
    ended = time.monotonic()
    seen.setdefault("done", ended)
    marks = [*seen.items(), ("", ended)]
    durations = {phase: round(marks[i + 1][1] - at, 2) for i, (phase, at) in enumerate(marks[:-1])}
    return {**durations, "all": round(ended - launched, 2)}


@dataclass
class Kill:
    target: str
    """The phase the kill was aimed at."""
    phase: str
    """The phase state.json named at the kill (a short phase may be over when its point comes)."""
    after_s: float
    """Seconds after the poller saw the target phase under the live process."""
    running: list[str]
    """Trials RUNNING at the kill ('study #number')."""


@dataclass
class KilledRun:
    kills: list[Kill]
    wall_s: float
    """From the first launch to the last process's exit, resumes included."""
    returncode: int | None


def killed_search(args: list[str], run_dir: Path, log: Path, targets: list[str], durations: dict[str, float],
                  seed: int, fraction: tuple[float, float] = (0.1, 0.45), timeout: float = 1800) -> KilledRun:
    """`coevo search ARGS`, SIGKILLed with its process group once per target phase, then resumed with
    `--resume RUN_DIR` and left to finish. Each kill comes at a seeded random point: a `fraction` (drawn
    uniformly) of the phase's straight-run wall time (`durations`, from `timed_search`) after the poller saw
    the phase begun under a live process (one that has written to search.log since it started). A target
    the run is past already is killed where the run is. Stops early if the run finishes first."""
    order = [p for p in durations if p != "all"]
    missing = [t for t in targets if t not in order]
    if missing:
        raise ValueError(f"targets {missing} are not phases of the straight run ({', '.join(order)})")

    def rank(phase: str) -> int:  # 'start' may pass unseen in a straight run that opens w0 at once
        return order.index(phase) if phase in order else -1

    rng, kills, launched = random.Random(seed), [], time.monotonic()
    process, size = search_process(args, log), _log_size(run_dir)
    try:
        for target in targets:
            delay, since = rng.uniform(*fraction) * durations[target], None
            while since is None or time.monotonic() - since < delay:
                if process.poll() is not None:
                    break
                if time.monotonic() - launched > timeout:
                    raise TimeoutError(f"no kill in {target} within {timeout:.0f} s")
                phase = run_phase(run_dir)
                if since is None and _log_size(run_dir) > size and rank(phase) >= rank(target):
                    since = time.monotonic()
                time.sleep(0.02)
            if process.poll() is not None:
                break
            phase, running = run_phase(run_dir), running_trials(run_dir)
            _kill(process)
            kills.append(Kill(target, phase, round(time.monotonic() - since, 2), running))
            size = _log_size(run_dir)
            process = search_process(["--resume", str(run_dir)], log)
        returncode = process.wait(max(1.0, timeout - (time.monotonic() - launched)))
    finally:
        if process.poll() is None:
            _kill(process)
    return KilledRun(kills, round(time.monotonic() - launched, 2), returncode)
