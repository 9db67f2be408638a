"""Faults injected into real runs, and what each one cost. Prints one table: the fault, where it was
injected, whether the run survived it (it went on or resumed, and finished), what was lost (trials,
episodes, checkpoints, MLflow runs, traces), and the time to recover.

    nice -n 5 .venv/bin/python benchmarks/faults.py [--only SUBSTRING] [--keep]

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

Fault groups live in faults_runs.py (processes killed, servers restarted, disks filled) and
faults_episodes.py (sandboxes, verifiers, models, corrupt files), each a list of functions
`(Env) -> list[Row]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "tests")]  # tests/servers.py, tests/search_helpers.py


@dataclass
class Row:
    fault: str
    where: str
    survived: bool
    lost: str = "nothing"
    recover_s: float | None = None
    note: str = ""


class Env:
    """What the faults share: a scratch folder, a generated suite, the tiny model (built once)."""

    def __init__(self, root: Path):
        self.root = root
        self._suite: Path | None = None
        self._tiny: Path | None = None

    def folder(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def suite(self) -> Path:
        """A generated suite with all splits (train 38, dev 19, test 9), as the search tests use."""
        if self._suite is None:
            from coevo.tasks.generate import generate_suite

            self._suite = self.root / "suite"
            generate_suite(self._suite, seed=0, per_family=3)
        return self._suite

    @property
    def tiny(self) -> Path:
        if self._tiny is None:
            from coevo.train.model import build_tiny_model

            self._tiny = build_tiny_model(self.root / "tiny", REPO / "tasks", seed=0, prompts_dir=REPO / "prompts")
        return self._tiny


# -- processes ----------------------------------------------------------------------------------------
def coevo(*args: str, log: Path, env: dict | None = None, cwd: Path = REPO) -> subprocess.Popen:
    """`coevo ARGS` in a subprocess of its own session, its output in `log` (never a full pipe)."""
    out = open(log, "ab")  # noqa: SIM115 - the child holds it
    process = subprocess.Popen([sys.executable, "-m", "coevo.cli", *args], cwd=cwd, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True,
                               env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", **(env or {})})
    process.log = log
    return process


def coevo_run(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coevo.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False,
                          env={**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "COLUMNS": "300", **(env or {})})


def sigkill(process: subprocess.Popen) -> float:
    """SIGKILL the process group (the command and what it started); returns when it happened."""
    import signal

    at = time.monotonic()
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(30)
    return at


def tail(process_or_path, n: int = 2000) -> str:
    path = Path(getattr(process_or_path, "log", process_or_path))
    return path.read_text(errors="replace")[-n:] if path.exists() else ""


def wait_for(condition, seconds: float, what: str, process: subprocess.Popen | None = None, every: float = 0.2):
    """Poll `condition()` until it is truthy; a TimeoutError (or the process's exit) says what never came."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"exited {process.returncode} before {what}: {tail(process)}")
        time.sleep(every)
    raise TimeoutError(f"no {what} within {seconds:.0f} s")


def no_traceback(text: str) -> bool:
    return "Traceback (most recent call last)" not in text


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
    import faults_runs

    return faults_runs.FAULTS + faults_episodes.FAULTS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="Only fault groups whose function name contains this.")
    parser.add_argument("--keep", action="store_true", help="Keep the scratch folder.")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("benchmarks/faults.py needs root (tmpfs mounts, a docker daemon of its own)")
    root = Path(tempfile.mkdtemp(prefix="coevo-faults-", dir="/var/tmp"))
    env, rows, started = Env(root), [], time.perf_counter()
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
