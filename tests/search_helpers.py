"""What the `coevo search` tests share: a small space over real harness fields and a config writer whose
policy is the synthetic harness-sensitive oracle (coevo/policy/synthetic.py)."""

from __future__ import annotations

import sqlite3
import time
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


def study_trials(db: Path, study: str) -> list[tuple[int, str, int]]:
    """(number, state, intermediate values reported) per trial, read straight from the sqlite file."""
    if not db.exists():
        return []
    for _ in range(50):
        try:
            with sqlite3.connect(db, timeout=5) as con:
                return con.execute(
                    "SELECT t.number, t.state, (SELECT COUNT(*) FROM trial_intermediate_values v WHERE v.trial_id"
                    " = t.trial_id) FROM trials t JOIN studies s ON t.study_id = s.study_id WHERE s.study_name = ?"
                    " ORDER BY t.number", (study,)).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):  # the search has not created its tables yet
                return []
            time.sleep(0.1)  # locked by a worker's write: an empty answer here would read as trials lost
    raise TimeoutError(f"{db}: still locked after 50 tries")


def final_table(state) -> dict:
    """The table's numbers and decisions, without run ids and paths (which differ between folders)."""
    rows = {row: {k: r[k] for k in ("per_task", "pass_at_1", "ci_low", "ci_high", "score", "generation",
                                      "overrides", "gain", "gain_low", "gain_high")} for row, r in state.test.items()}
    decisions = [{k: h[k] for k in ("phase", "challenger", "accepted", "gain", "wins", "losses", "ties")}
                 for h in state.history]
    return {"rows": rows, "verdict": state.verdict, "decisions": decisions}
