"""The verifier: a task's tests go in only after the agent's sandbox is stopped and all its processes
are gone. They run in a new session over the agent's final /app, with a fresh copy of tests/ at
/tests and an empty /logs/verifier. Harbor's conventions, so that third-party tasks run unchanged.
It needs only the Sandbox protocol (stop, upload, start, run, download, close), so every backend
verifies the same way.

A reward that cannot be read is a verifier error: recorded as such (distinct from a failed task)
and scored 0.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from coevo import Sandbox
from coevo.errors import VerifierError
from coevo.tasks.task import Task

MAX_REWARD_BYTES = 1 << 16


@dataclass
class VerifyResult:
    reward: float
    """Overall reward in [0, 1]: reward.txt, else reward.json's 'reward', else the mean of its values."""
    checks: dict[str, float] = field(default_factory=dict)
    """Per-check partial credit from reward.json (empty when only reward.txt was written)."""
    error: str | None = None
    """Why the reward is unusable (a verifier error); the reward is then 0."""
    output: str = ""
    duration_s: float = 0.0

    @property
    def partial(self) -> float:
        """Partial credit: the mean of the checks, or the overall reward when there are none."""
        return sum(self.checks.values()) / len(self.checks) if self.checks else self.reward


def verify(task: Task, sandbox: Sandbox) -> VerifyResult:
    """Stop the agent's sandbox (every agent process is gone), run the task's tests on its /app in a
    new session, then close it."""
    sandbox.stop()
    try:
        return run_tests(task, sandbox)
    finally:
        sandbox.close()


def run_tests(task: Task, sandbox: Sandbox) -> VerifyResult:
    """Put tests/ in at /tests and an empty /logs/verifier, start a fresh session (new shell, empty
    /tmp, none of the agent's exports), run tests/test.sh and read the reward it wrote."""
    timeout = task.config.verifier.timeout_sec
    with tempfile.TemporaryDirectory(prefix="coevo-verify-") as tmp:
        empty, logs = Path(tmp) / "empty", Path(tmp) / "logs"
        empty.mkdir()
        sandbox.upload(task.path / "tests", "/tests")
        sandbox.upload(empty, "/logs/verifier")
        sandbox.start()
        result = sandbox.run("bash /tests/test.sh", timeout=timeout)
        outcome = VerifyResult(reward=0.0, output=result.output, duration_s=result.duration_s)
        if result.timed_out:
            outcome.error = f"VerifierTimeout: tests/test.sh ran past verifier.timeout_sec={timeout:g}"
            return outcome
        sandbox.stop()  # nothing the tests left running may write the reward while it is read
        sandbox.download("/logs/verifier", logs)
        try:
            outcome.reward, outcome.checks = read_reward(logs)
        except VerifierError as e:
            outcome.error = f"VerifierError: {e}"
        return outcome


def read_reward(logs: Path) -> tuple[float, dict[str, float]]:
    """(overall reward, per-check credit) from reward.txt and/or reward.json in `logs`."""
    txt, js = _read(logs / "reward.txt"), _read(logs / "reward.json")
    if txt is None and js is None:
        raise VerifierError("the tests wrote neither /logs/verifier/reward.txt nor reward.json")
    checks = _parse_json(js) if js is not None else {}
    if txt is not None:
        return _number(txt.strip(), "reward.txt"), checks
    if "reward" in checks:
        return checks["reward"], checks
    if not checks:
        raise VerifierError("reward.json is an empty dict; expected e.g. {\"reward\": 1.0}")
    return sum(checks.values()) / len(checks), checks


def _read(path: Path) -> str | None:
    """Read a reward file without following symlinks (tests run code the agent may have touched)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise VerifierError(f"{path.name}: cannot be read ({e.strerror}); it must be a regular file") from e
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_REWARD_BYTES + 1)
    if len(data) > MAX_REWARD_BYTES:
        raise VerifierError(f"{path.name}: larger than {MAX_REWARD_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def _parse_json(text: str) -> dict[str, float]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise VerifierError(f"reward.json is not valid JSON (line {e.lineno}: {e.msg})") from e
    if not isinstance(data, dict):
        raise VerifierError(f"reward.json must be a flat dict of numbers, got {type(data).__name__}")
    return {str(k): _number(v, f"reward.json['{k}']") for k, v in data.items()}


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or value == "":
        raise VerifierError(f"{where}: expected a number in [0, 1], got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise VerifierError(f"{where}: expected a number in [0, 1], got {str(value)[:80]!r}") from None
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise VerifierError(f"{where}: {number} is out of range; rewards are numbers in [0, 1]")
    return number
