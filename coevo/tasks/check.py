"""`coevo tasks check`: every task must score 1 with its reference solution and 0 when nothing is done.

The reference solution runs like Harbor's oracle agent: from /app, with solution/ at /solution.
Verification then follows the same path as any agent's episode. Each task runs on the chosen backend
(`auto`: docker for a task that needs an image build, local otherwise), named in its row.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from coevo.errors import CoevoError, NeedsDockerError
from coevo.sandbox import choose_backend, make_sandbox
from coevo.tasks.task import Task, find_task_folders, load_task
from coevo.verify import VerifyResult, verify


@dataclass
class CheckRow:
    task: str
    backend: str = ""
    oracle: float | None = None
    nothing: float | None = None
    oracle_s: float = 0.0
    nothing_s: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.oracle == 1.0 and self.nothing == 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def run_episode(task: Task, commands: str | None, backend: str = "local",
                image_map: dict[str, str] | None = None) -> tuple[VerifyResult, float]:
    """Run `commands` (or nothing) in a fresh sandbox, then verify. Returns (result, seconds)."""
    started = time.monotonic()
    sandbox = make_sandbox(task, backend, image_map)
    try:
        # As Harbor's oracle (environment.upload_dir to /solution): a copy, here owned by the sandbox's
        # uid, so a root-owned 0700 solution/ still runs; a bind mount would keep the host's owner.
        if commands:
            sandbox.upload(task.path / "solution", "/solution")
        sandbox.start()
        if commands:
            sandbox.run(commands, timeout=task.config.agent.timeout_sec)
        result = verify(task, sandbox)
    finally:
        sandbox.close()
    return result, time.monotonic() - started


def check_task(folder: Path, backend: str = "local", image_map: dict[str, str] | None = None) -> CheckRow:
    """Oracle and nothing episodes of one task on `backend` (auto: chosen for this task)."""
    row = CheckRow(task=folder.name, backend=backend)
    try:
        task = load_task(folder)
        if task.solution is None:
            raise CoevoError(f"task {task.name}: no solution/solve.sh to check against")
        row.backend = choose_backend(task) if backend == "auto" else backend
        oracle, row.oracle_s = run_episode(task, "bash /solution/solve.sh", row.backend, image_map)
        nothing, row.nothing_s = run_episode(task, None, row.backend, image_map)
    except NeedsDockerError as e:
        row.error = f"{e}\n  (check it with --backend docker, or auto)"
        return row
    except CoevoError as e:  # a broken task is a row in the report, not the end of the check
        row.error = str(e)
        return row
    row.oracle, row.nothing = oracle.reward, nothing.reward
    problems = [f"oracle: {r.error}" for r in [oracle] if r.error] + [
        f"nothing: {r.error}" for r in [nothing] if r.error]
    if oracle.reward != 1.0 and not oracle.error:
        problems.append(f"reference solution scored {oracle.reward}; verifier said: {oracle.output[-300:]}")
    if nothing.reward != 0.0 and not nothing.error:
        problems.append(f"doing nothing scored {nothing.reward}")
    row.error = "; ".join(problems) or None
    return row


def task_folders(paths: list[Path]) -> list[Path]:
    """The task folders of each path; a path that holds none is an error, not a check of nothing."""
    found = []
    for path in paths:
        folders = [folder for folder, _, _ in find_task_folders(path)]
        if not folders:
            raise CoevoError(f"{path}: no task here: a task folder holds task.toml (with instruction.md, "
                             "environment/ and tests/), a folder of tasks holds such folders or a manifest.json")
        found += folders
    return found


def check_folders(folders: list[Path], jobs: int, on_done: Callable[[CheckRow], None] = lambda r: None,
                  backend: str = "local", image_map: dict[str, str] | None = None) -> list[CheckRow]:
    rows: list[CheckRow] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for row in pool.map(lambda folder: check_task(folder, backend, image_map), folders):
            rows.append(row)
            on_done(row)
    return rows


def print_check_table(rows: list[CheckRow]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    failed = [r for r in rows if not r.ok]
    table = Table("task", "backend", "oracle", "nothing", "oracle s", "nothing s", "result",
                  title=f"coevo tasks check: {len(rows) - len(failed)}/{len(rows)} ok")
    for r in rows:
        verdict = "[green]ok[/]" if r.ok else f"[red]FAIL[/] {escape(r.error or '')}"  # '[verifier]' is no markup
        table.add_row(r.task, r.backend, _score(r.oracle), _score(r.nothing), f"{r.oracle_s:.2f}", f"{r.nothing_s:.2f}",
                      verdict)
    Console().print(table)


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
