"""Sandbox backends, chosen by a short name. `make_sandbox(task)` gives an unstarted sandbox whose /app
is seeded from the task's environment/ folder (local) or built from it as an image (docker).

`auto` picks docker for a task whose Dockerfile needs an image build (or names a prebuilt image) when
an engine answers, and local otherwise (`choose_backend`)."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

from coevo import Sandbox
from coevo.errors import NeedsDockerError, SandboxUnavailableError, TaskError
from coevo.sandbox.bwrap import Limits, Mount
from coevo.tasks.task import Task

BACKENDS = {"local": "coevo.sandbox.local.LocalSandbox", "docker": "coevo.sandbox.docker.DockerSandbox"}

__all__ = ["BACKENDS", "CHOICES", "Limits", "Mount", "backends_for", "choose_backend", "host_mounts",
           "make_sandbox", "require_engine", "seed_app", "task_limits"]

CHOICES = (*BACKENDS, "auto")
"""What `--backend` and the search config's `sandbox:` accept."""


def make_sandbox(task: Task, backend: str = "local", image_map: dict[str, str] | None = None,
                 **options) -> Sandbox:
    """An unstarted sandbox for one episode of `task`. `image_map` (FROM name -> local image; None:
    COEVO_IMAGE_MAP) matters only where an image is built, so the local backend ignores it. Other
    options go to the backend (timeout, output_cap; docker also takes run_id)."""
    if backend == "auto":
        backend = choose_backend(task)
    if backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend '{backend}'; valid: {', '.join(CHOICES)}")
    module, _, name = BACKENDS[backend].rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    if backend == "docker":  # the image build does what seed_app does for the local backend
        return cls.for_task(task, image_map=image_map, **options)
    task.env.require_local(task.name)
    mounts = [*host_mounts(task), *options.pop("mounts", [])]
    sandbox = cls(env=task.env.env, hidden=hidden_paths(task), limits=task_limits(task), mounts=mounts,
                  workdir=str(task.env.workdir), **options)
    seed_app(task, sandbox.app_dir)
    return sandbox


def choose_backend(task: Task) -> str:
    """"docker" when the task needs an image (RUN lines, a non-Debian base, docker_image) and an engine
    answers; "local" when the host's userland will do. A task that needs docker without an engine is
    an error that says how to start one, never a half-prepared local run."""
    if not task.env.needs_docker and not task.config.environment.docker_image:
        return "local"
    why = task.env.needs_docker[0] if task.env.needs_docker else "environment.docker_image in task.toml"
    require_engine(f"task {task.name}: needs the docker backend ({task.env.dockerfile}, {why}), but")
    return "docker"


def require_engine(who: str) -> None:
    """Raise, saying how to start a daemon or where to point DOCKER_HOST, when no docker engine answers."""
    from coevo.sandbox.docker_io import daemon_error

    problem = daemon_error()
    if problem:
        raise SandboxUnavailableError(f"{who} {problem}")


def backends_for(tasks: list[Task], backend: str) -> dict[str, str]:
    """Task name -> the backend its episodes will get, checked before any episode starts, so that a run
    that cannot work fails once with the reason instead of scoring every episode a sandbox_error."""
    if backend not in CHOICES:
        raise ValueError(f"--backend {backend!r}: valid: {', '.join(CHOICES)}")
    if backend == "auto":
        return {task.name: choose_backend(task) for task in tasks}
    if backend == "docker":
        require_engine("--backend docker:")
    else:
        refused = [t for t in tasks if t.env.needs_docker]
        if refused:
            reasons = "\n".join(f"  task {t.name}: {t.env.dockerfile}, {t.env.needs_docker[0]}" for t in refused)
            raise NeedsDockerError(f"{len(refused)} task(s) need the docker backend; run with --backend docker "
                                   f"(or auto, which picks it per task):\n{reasons}")
    return {task.name: backend for task in tasks}


def host_mounts(task: Task) -> list[Mount]:
    """The host folders a task names in task.toml (`[environment] host_paths`), bound read-only at the
    same path. None may hold a task folder: that would show tests and solutions to the agent."""
    mounts = []
    for i, raw in enumerate(task.config.environment.host_paths):
        path = Path(raw)
        where = f"task {task.name}: {task.path / 'task.toml'}: environment.host_paths[{i}] = {raw!r}"
        if not path.is_absolute() or not path.is_dir():
            raise TaskError(f"{where}: expected an absolute path of a host folder, such as /opt/toolchain")
        hosted = task.path.resolve()
        if path.resolve() in (hosted, *hosted.parents) or hosted.parent in path.resolve().parents:
            raise TaskError(f"{where}: it holds task folders (tests, solutions); name a folder outside them")
        mounts.append(Mount(path, str(path)))
    return mounts


def hidden_paths(task: Task) -> list[Path]:
    """The task's own folder and its siblings hold tests and solutions. The sandbox's root has none of
    the host's other folders, so these matter only for a task set kept under a system folder."""
    path = task.path.resolve()
    return [path.parent, path]


def task_limits(task: Task) -> Limits:
    return Limits(cpu_sec=int(max(60, task.config.agent.timeout_sec)),
                  address_space_mb=max(256, task.config.environment.memory_mb))


def seed_app(task: Task, app_dir: Path) -> None:
    """Do what the Dockerfile's COPY lines would have done, into the host folder bound at /app."""
    for copy in task.env.copies:
        target = app_dir / copy.dest.relative_to("/app")
        for source in copy.sources:
            dest = target / source.name if copy.into_dir and not source.is_dir() else target
            if source.is_dir():
                shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest, follow_symlinks=False)
    workdir = app_dir / task.env.workdir.relative_to("/app")
    workdir.mkdir(parents=True, exist_ok=True)
