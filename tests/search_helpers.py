"""What the `coevo search` tests share: a small space over real harness fields and a config writer whose
policy is the synthetic harness-sensitive oracle (coevo/policy/synthetic.py)."""

from __future__ import annotations

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
