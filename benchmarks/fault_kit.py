"""What the fault groups of benchmarks/faults.py share: the result row, the scratch environment (a suite,
the tiny model, the config of the nested case), `coevo` in subprocesses, SIGKILL of a process group, and
polling. Its own module, so that faults.py imports the groups and no group imports faults.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "search_spaces" / "quickstart_nested.yaml"
"""The nested case's config: the nested quickstart (SmolLM2, pulled by .ci/setup), ~15 min a run."""


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

    def __init__(self, root: Path, config: Path = QUICKSTART):
        self.root = root
        self.config = config
        """The search config of the nested case (faults_nested.py)."""
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
