"""Scale-out of the h-phase on this machine: trials per minute with 1, 2 and 4 evaluating processes, and
what PostgreSQL costs per trial against sqlite. Prints two markdown tables.

1. Workers: one `coevo search` owner plus 0, 1 or 3 `coevo search CONFIG --worker` processes on one
   h-phase, sharing a throwaway PostgreSQL cluster (Optuna) and an MLflow server backed by it (the set-up
   of tests/test_scale_out.py, started here the same way). Throughput is the h-phase's finished trials
   over the span from the first trial's start to the last one's end, as Optuna recorded them; process
   start-up, the baseline and the final table are outside it.
2. Stores: the same h-phase with one process on sqlite files in the run folder (the default) and on
   PostgreSQL + the MLflow server, as seconds per trial; and Optuna's storage alone (a trial that
   suggests 5 parameters, reports 2 intermediate values and sets 6 user attrs, with heartbeats), as
   milliseconds per trial.

Policy: the synthetic harness-sensitive oracle (coevo/policy/synthetic.py), so a trial is real sandboxes
and verifiers without a model; with a model, generation dominates a trial and the store's share shrinks.

    .venv/bin/python benchmarks/workers.py [--trials 16] [--dev 8] [--workers 1 2 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def h_phase(folder: Path, suite: Path, name: str, processes: int, trials: int, dev: int, **stores) -> dict:
    """Run a one-h-phase search with `processes` evaluating processes; its trials as Optuna saw them."""
    import optuna
    from search_helpers import write_config

    from coevo.search.study import make_storage

    config = write_config(folder, suite, name=name, pruning=False, arms=False, model=str(folder),
                          plan={"trials": trials, "dev_tasks": dev, "batches": 1, "test_tasks": 3},
                          splits={"promotion": 6, "test": 6}, grace_period=30, **stores)
    cmd = [sys.executable, "-m", "coevo.cli", "search", str(config)]
    with open(folder / f"{name}.log", "w") as log:
        # Workers first: they wait for the owner's run, so every one is ready when the h-phase opens.
        started = [subprocess.Popen([*cmd, "--worker"], cwd=ROOT, stdout=log, stderr=log)
                   for _ in range(processes - 1)]
        started.append(subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=log))
        codes = [p.wait(1800) for p in started]
    if any(codes):
        raise SystemExit(f"{name}: exit codes {codes}; see {folder / f'{name}.log'}")
    url = stores.get("storage") or f"sqlite:///{folder / 'runs' / name / 'optuna.db'}"
    done = [t for t in optuna.load_study(study_name=f"{name}.h1", storage=make_storage(url, 5, 30)).trials
            if t.state.name == "COMPLETE" and "source" not in t.user_attrs]  # seeded trials ran no episodes
    span = (max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)).total_seconds()
    durations = [(t.datetime_complete - t.datetime_start).total_seconds() for t in done]
    return {"trials": len(done), "span": span, "per_minute": 60 * len(done) / span,
            "seconds_per_trial": statistics.median(durations),
            "by_worker": len({t.user_attrs.get("worker", "owner") for t in done})}


def median_of(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def storage_only(url: str, trials: int = 40) -> float:
    """Milliseconds of Optuna storage work per trial: a trial that does nothing but talk to the storage."""
    from coevo.search.study import make_sampler, make_storage, open_study

    study = open_study(make_storage(url, 5, 30), f"overhead-{time.monotonic_ns()}", make_sampler("random", 0, trials),
                       None)

    def objective(trial) -> float:
        values = [trial.suggest_float(f"x{i}", 0, 1) for i in range(5)]
        for step in range(2):
            trial.report(sum(values) * step, step)
        for key in ("per_task", "pass_at_1", "ci_low", "ci_high", "mlflow_run", "episodes"):
            trial.set_user_attr(key, 0.5)
        return sum(values)

    study.optimize(objective, n_trials=3)  # warm: tables, connections, caches
    started = time.perf_counter()
    study.optimize(objective, n_trials=trials)
    return 1000 * (time.perf_counter() - started) / trials


def main() -> None:
    from servers import postgres_and_mlflow

    from coevo.tasks.generate import generate_suite

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--dev", type=int, default=8, help="dev tasks per trial")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every set-up, interleaved (medians)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="coevo-bench-workers-"))
    suite = folder / "tasks"
    generate_suite(suite, seed=0, per_family=3)
    load = os.getloadavg()[0]
    with postgres_and_mlflow() as (cluster, tracking):
        shared = {"storage": cluster.url(), "tracking_uri": tracking}
        runs: dict = {key: [] for key in [*args.workers, "sqlite", "optuna sqlite", "optuna postgresql"]}
        # Interleaved rounds: a burst of load from elsewhere on a shared machine then hits every set-up.
        for r in range(args.rounds):
            for n in args.workers:
                runs[n].append(h_phase(folder, suite, f"w{n}r{r}", n, args.trials, args.dev, **shared))
            runs["sqlite"].append(h_phase(folder, suite, f"sqliter{r}", 1, args.trials, args.dev))
            runs["optuna sqlite"].append(storage_only(f"sqlite:///{folder / 'overhead.db'}"))
            runs["optuna postgresql"].append(storage_only(cluster.url()))
    shutil.rmtree(folder)  # on success only: a failed run names its log in there
    scaling = {n: median_of(runs[n]) for n in args.workers}
    local = median_of(runs["sqlite"])
    optuna_ms = {k: statistics.median(runs[f"optuna {k}"]) for k in ("sqlite", "postgresql")}
    one = scaling[min(scaling)]
    print(f"\n## h-phase throughput ({args.trials} trials x {args.dev} dev tasks, synthetic policy, "
          f"{os.cpu_count()} cores, medians of {args.rounds} interleaved rounds, load average {load:.1f} at the "
          "start)\n")
    print("| processes (owner + workers) | finished trials | span (s) | trials/minute | speed-up | "
          "processes that finished trials |")
    print("|---|---|---|---|---|---|")
    for n, r in scaling.items():
        print(f"| {n} | {r['trials']} | {r['span']:.1f} | {r['per_minute']:.1f} | "
              f"{r['per_minute'] / one['per_minute']:.2f}x | {r['by_worker']} |")
    print("\n## PostgreSQL against sqlite, per trial (one process)\n")
    print("| store | h-phase seconds per trial, median (Optuna + MLflow + episodes) | Optuna storage alone, ms per "
          "trial |")
    print("|---|---|---|")
    print(f"| sqlite files (Optuna, MLflow) | {local['seconds_per_trial']:.2f} | {optuna_ms['sqlite']:.1f} |")
    print(f"| PostgreSQL (Optuna) + MLflow server on PostgreSQL | {one['seconds_per_trial']:.2f} | "
          f"{optuna_ms['postgresql']:.1f} |")
    print(f"\nPostgreSQL + server overhead: {one['seconds_per_trial'] - local['seconds_per_trial']:+.2f} s per "
          f"h-phase trial; Optuna storage alone {optuna_ms['postgresql'] - optuna_ms['sqlite']:+.1f} ms per trial.")


if __name__ == "__main__":
    main()
