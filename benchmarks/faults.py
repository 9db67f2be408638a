"""Faults injected into real runs, and what each one cost. Prints one table: the fault, where it was
injected, whether the run survived it (it went on or resumed, and finished), what was lost (trials,
episodes, checkpoints, MLflow runs, traces), and the time to recover.

    nice -n 5 .venv/bin/python benchmarks/faults.py [--only SUBSTRING] [--keep] [--config CONFIG]

Everything is real: `coevo search`, `coevo train`, `coevo eval` and `coevo serve` in subprocesses, SIGKILL
from outside, sandboxes (bubblewrap and docker), the verifiers of task folders written here, a PostgreSQL
cluster and an MLflow server (tests/servers.py), tmpfs mounts that fill up, a docker daemon of its own that
is stopped mid-episode, and HTTP model servers that answer badly. The tiny model and small task sets keep
the whole script to about 15 minutes on 2 busy cores. Needs root (mounts, a second dockerd).

- survived: the run went on (or `--resume` took over) and finished, with every piece of finished work
  (a completed trial, a published checkpoint, a FINISHED MLflow run, a scored episode) as it was before the
  fault; a fault at load time survives when it is refused with a message naming the file, no traceback.
- lost: finished work that was gone or redone afterwards; "in flight" names what was running at the
  fault and was redone (a trial, a GRPO step, a reply).
- recover: seconds from the fault to the first unit of work finished after it (a trial, a step, an
  episode, a served reply), restarts included; "-" where nothing needs recovering.

Fault groups live in faults_runs.py (processes killed, servers restarted, disks filled), faults_nested.py (a
nested search, CONFIG, default search_spaces/quickstart_nested.yaml, SIGKILLed at seeded random points of every
phase and resumed, against the same run straight through: it prints a table of its own too) and
faults_episodes.py (sandboxes, verifiers, models, corrupt files), each a list of functions
`(Env) -> list[Row]`; what they share is in fault_kit.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from fault_kit import QUICKSTART, REPO, Env, Row

sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "tests")]  # tests/servers.py, tests/search_helpers.py

# -- the table ----------------------------------------------------------------------------------------
def table(rows: list[Row]) -> str:
    lines = ["| # | fault | where injected | survived | lost | recover (s) | note |", "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        recover = "-" if r.recover_s is None else f"{r.recover_s:.1f}"
        note = r.note.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {i} | {r.fault} | {r.where} | {'yes' if r.survived else 'NO'} | {r.lost} | {recover} | "
                     f"{note[:220]} |")
    return "\n".join(lines)


def groups():
    import faults_episodes
    import faults_nested
    import faults_runs

    return faults_runs.FAULTS + faults_nested.FAULTS + faults_episodes.FAULTS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="Only fault groups whose function name contains this.")
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder.")
    parser.add_argument("--config", type=Path, default=QUICKSTART,
                        help="Search config of the nested case, killed and resumed (default: %(default)s).")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/faults.py needs root (tmpfs mounts, a docker daemon of its own)")
    root = Path(tempfile.mkdtemp(prefix="coevo-faults-", dir="/var/tmp"))
    env, rows, started = Env(root, args.config.resolve()), [], time.perf_counter()
    try:
        for group in groups():
            if args.only not in group.__name__:
                continue
            began = time.perf_counter()
            try:
                found = group(env)
            except Exception as e:  # noqa: BLE001 - a group that breaks is a row, and the table goes on
                found = [Row(group.__name__, "(the fault could not be injected)", False, "?", None,
                             f"{type(e).__name__}: {e}"[:400])]
                traceback.print_exc()
            rows += found
            for r in found:
                print(f"  {r.fault}: {'survived' if r.survived else 'NOT SURVIVED'}; lost {r.lost} "
                      f"({time.perf_counter() - began:.0f}s) {r.note[:200]}", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rows))
    print(f"\nsurvived {sum(r.survived for r in rows)}/{len(rows)} faults; "
          f"{time.perf_counter() - started:.0f} s in all")
    return 0 if all(r.survived for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
