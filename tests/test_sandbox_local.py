"""The sandbox contract against the local (bubblewrap) backend, plus what is specific to it."""

from __future__ import annotations

import os

import pytest
from sandbox_contract import SandboxContract

from coevo.errors import SandboxUnavailableError
from coevo.sandbox import make_sandbox
from coevo.sandbox.bwrap import require_bwrap


class TestLocalSandbox(SandboxContract):
    @pytest.fixture
    def sandbox(self, task):
        sandbox = make_sandbox(task, backend="local", timeout=20)
        sandbox.start()
        yield sandbox
        sandbox.close()


def test_dockerfile_env_and_seed_files_reach_the_sandbox(make_task):
    from coevo.tasks import load_task

    dockerfile = "FROM python:3.11-slim\nWORKDIR /app/work\nCOPY app/ /app/\nENV GREETING=\"hi there\"\n"
    task = load_task(make_task(dockerfile=dockerfile))
    with make_sandbox(task) as sandbox:
        assert sandbox.run("pwd; echo $GREETING; cat /app/input.txt").output == "/app/work\nhi there\nhello\n"


def test_missing_bubblewrap_is_a_clear_error_never_a_fallback(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SandboxUnavailableError, match="apt-get install -y bubblewrap"):
        require_bwrap.__wrapped__()


def test_unknown_backend_names_the_valid_ones(task):
    with pytest.raises(ValueError, match="valid: local"):
        make_sandbox(task, backend="podman")


def test_workspaces_of_dead_processes_are_swept_and_live_ones_kept(tmp_path):
    import subprocess
    import sys

    from coevo.sandbox import local

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    orphan = tmp_path / f"{local.WORKSPACE_PREFIX}{dead.stdout.strip()}-abc"
    mine = tmp_path / f"{local.WORKSPACE_PREFIX}{os.getpid()}-def"
    for folder in (orphan, mine):
        (folder / "app").mkdir(parents=True)
    local.sweep_orphans(tmp_path)
    assert not orphan.exists() and mine.exists()
    with local.LocalSandbox() as sandbox:  # a sandbox's own workspace names its process
        assert sandbox.workspace.name.startswith(f"{local.WORKSPACE_PREFIX}{os.getpid()}-")
        assert sandbox.run("echo ok").output.strip() == "ok"


def test_root_owned_0700_tests_and_solution_still_verify(make_task):
    """As under Harbor, which uploads task files: the sandbox's uid gets its own copies."""
    from coevo.tasks.check import check_task

    folder = make_task("private")
    for sub in ("tests", "solution"):
        os.chmod(folder / sub, 0o700)
        if os.geteuid() == 0:
            os.chown(folder / sub, 0, 0)
    row = check_task(folder)
    assert row.ok and row.oracle == 1.0 and row.nothing == 0.0, row


def test_host_paths_named_in_task_toml_are_bound_read_only_and_task_folders_refused(make_task, tmp_path):
    from conftest import TASK_TOML

    from coevo.errors import TaskError
    from coevo.tasks import load_task

    toolchain = tmp_path / "opt-toolchain"
    (toolchain / "bin").mkdir(parents=True)
    (toolchain / "bin" / "tool").write_text("#!/bin/sh\necho tool ran\n")
    (toolchain / "bin" / "tool").chmod(0o755)
    os.chmod(tmp_path, 0o755)  # pytest makes it 0700; a real /opt is world-readable
    toml = TASK_TOML.replace("[environment]", f"[environment]\nhost_paths = [\"{toolchain}\"]")
    with make_sandbox(load_task(make_task("tooled", task_toml=toml))) as sandbox:
        assert sandbox.run(f"{toolchain}/bin/tool").output == "tool ran\n"
        assert sandbox.run(f"touch {toolchain}/x").exit_code != 0
    folder = make_task("greedy", task_toml=TASK_TOML.replace("[environment]", "[environment]\nhost_paths = [\"/\"]"))
    with pytest.raises(TaskError, match=r"environment.host_paths\[0\] = '/': it holds task folders"):
        make_sandbox(load_task(folder))
