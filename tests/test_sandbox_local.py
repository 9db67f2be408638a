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
