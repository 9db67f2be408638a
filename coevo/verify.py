"""The verifier: a task's tests run only after the agent's sandbox is stopped and all its processes
are gone, in a fresh sandbox over the agent's final /app, with a fresh /tests and an empty
/logs/verifier. Harbor's conventions, so that third-party tasks run unchanged.

A reward that cannot be read is a verifier error: recorded as such (distinct from a failed task)
and scored 0.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from coevo.errors import VerifierError
from coevo.sandbox import Mount, hidden_paths, task_limits
from coevo.sandbox.local import LocalSandbox
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


def verify(task: Task, sandbox: LocalSandbox) -> VerifyResult:
    """Stop the agent's sandbox, run the task's tests on its /app, then close it."""
    sandbox.stop()
    try:
        return run_tests(task, sandbox.app_dir)
    finally:
        sandbox.close()


def run_tests(task: Task, app_dir: Path) -> VerifyResult:
    timeout = task.config.verifier.timeout_sec
    with tempfile.TemporaryDirectory(prefix="coevo-verify-") as tmp:
        tests, logs = Path(tmp) / "tests", Path(tmp) / "logs"
        shutil.copytree(task.path / "tests", tests, symlinks=True)
        logs.mkdir()
        checker = LocalSandbox(
            app_dir=app_dir, env=task.env.env, hidden=hidden_paths(task), limits=task_limits(task),
            mounts=[Mount(tests, "/tests", True), Mount(logs, "/logs/verifier", True)],
            workdir=str(task.env.workdir), timeout=timeout,
        )
        with checker:
            result = checker.run("bash /tests/test.sh")
        outcome = VerifyResult(reward=0.0, output=result.output, duration_s=result.duration_s)
        if result.timed_out:
            outcome.error = f"VerifierTimeout: tests/test.sh ran past verifier.timeout_sec={timeout:g}"
            return outcome
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
