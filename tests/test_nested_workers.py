"""Workers in an n-phase (coevo/search/workers.py): an owner and one `coevo search CONFIG --worker` process
share a nested phase's trials. The real tiny model is built and trained, episodes run in real sandboxes,
Optuna and MLflow are real sqlite stores in the run folder."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from search_helpers import NESTED_SPACE, search_process, study_trials, write_config

TRIALS = 4


def test_a_worker_runs_nested_trials_with_adapters_of_its_own(suite, tmp_path):
    import optuna

    config = write_config(  # policy None: every pair is scored by the tiny model itself
        tmp_path, suite, name="nestedworkers", schedule="n", policy=None, arms=False, pruning=False, train={"sft_epochs": 1},
        overrides={"limits.max_turns": 3, "limits.max_tokens_per_turn": 48},
        splits={"promotion": 6, "test": 6, "held_out": 0},
        plan={"trials": TRIALS, "dev_tasks": 4, "batches": 2, "train_tasks": 3, "top_k": 2})
    (tmp_path / "space.yaml").write_text(NESTED_SPACE)
    run_dir = tmp_path / "runs" / "nestedworkers"
    # One torch thread each: two processes training at once, each with a thread per core, spin against
    # each other on 2 cores: this test took 141 to 231 s so, and 53 s with one thread each.
    one_core = {"OMP_NUM_THREADS": "1"}
    worker = search_process([str(config), "--worker"], tmp_path / "worker.log", one_core)  # waits for the run
    owner = search_process([str(config)], tmp_path / "owner.log", one_core)
    try:
        # The worker can only join once the owner has opened n1 (after the tiny model and the baseline).
        deadline = time.monotonic() + 300  # a hang guard, not a speed bound: 170 s was passed by 0.2 s
        while owner.poll() is None or worker.poll() is None:
            assert time.monotonic() < deadline, study_trials(run_dir / "optuna.db", "nestedworkers.n1")
            time.sleep(0.5)
        logs = {p: (tmp_path / f"{p}.log").read_text(errors="replace")[-3000:] for p in ("owner", "worker")}
        assert owner.returncode == 0 and worker.returncode == 0, logs
    finally:
        for p in (owner, worker):
            if p.poll() is None:  # its group: its sandboxes too
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)

    study = optuna.load_study(study_name="nestedworkers.n1", storage=f"sqlite:///{run_dir / 'optuna.db'}")
    trials = study.get_trials(states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED))
    assert TRIALS <= len(trials) <= TRIALS + 1  # each process may start one trial as the last one finishes
    by_worker = [t for t in trials if "worker" in t.user_attrs]
    assert by_worker and len(by_worker) < len(trials), logs  # both processes ran trials
    adapters = [Path(t.user_attrs["adapter"]) for t in trials]
    assert len(set(adapters)) == len(adapters)
    assert all((a / "adapter_config.json").is_file() for a in adapters)
    for t, adapter in zip(trials, adapters, strict=True):  # a worker's by its number, the owner's by its slot
        label = t.user_attrs.get("label", f"failed: {t.user_attrs.get('error')}")
        if "worker" in t.user_attrs:
            assert (label, adapter.parent.name) == (f"n1 #w{t.number}", f"n1-w{t.number}")
        else:
            assert adapter.parent.name == f"n1-t{label.split('#')[-1]}", label
        assert json.loads((adapter.parent / "nested.json").read_text())["harness_fingerprint"] == \
            t.user_attrs["trained_fingerprint"]
    state = json.loads((run_dir / "state.json").read_text())
    assert state["done"] and state["test"]  # the final table, after the owner picked the phase's best
    assert state["checkpoints"][-1] == str(run_dir / "checkpoints" / "n1")
    assert "worker done: ran" in (tmp_path / "worker.log").read_text()
