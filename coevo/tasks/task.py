"""Harbor / Terminal-Bench 2 task folders: `Task` (one folder) and `TaskSet` (a folder of them + splits).

Layout of a task folder:
    instruction.md  task.toml  environment/Dockerfile (+ files)  tests/test.sh (+ files)  solution/solve.sh
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from coevo.config import toml_field, validate
from coevo.errors import TaskError
from coevo.tasks.dockerfile import EnvSpec, parse_dockerfile

REQUIRED_FILES = ("instruction.md", "task.toml", "environment/Dockerfile", "tests/test.sh")
MANIFEST = "manifest.json"
SPLITS = ("train", "dev", "test")


class VerifierConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    timeout_sec: float = Field(600.0, gt=0)
    """Wall-clock limit for tests/test.sh."""


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    timeout_sec: float = Field(600.0, gt=0)
    """Wall-clock limit for the whole agent episode."""


class EnvironmentConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    cpus: float = Field(1.0, gt=0)
    """CPU cores; the local backend turns this into a CPU-time rlimit per command."""
    memory_mb: int = Field(2048, gt=0)
    """Memory limit. Harbor also accepts `memory = "2G"`, which is folded into this field."""
    host_paths: list[str] = Field(default_factory=list)
    """Host folders the task's runtime needs (say a toolchain in /opt), bound read-only at the same
    path by the local sandbox. Nothing else of the host outside its system folders is visible."""
    docker_image: str | None = None
    """A prebuilt image for the docker backend, used instead of building environment/ (as in Harbor)."""

    @model_validator(mode="before")
    @classmethod
    def _memory_string(cls, data: dict) -> dict:
        if isinstance(data, dict) and "memory" in data:
            data = dict(data)
            data["memory_mb"] = parse_memory(data.pop("memory"))
        return data


class TaskConfig(BaseModel):
    """task.toml. Unknown sections and keys are kept: third-party Harbor tasks carry more than we read."""

    model_config = ConfigDict(extra="allow")
    metadata: dict = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)


def parse_memory(value: object) -> int:
    """'2G', '512M', '1.5GB', '2Gi' or a number of MB -> MB."""
    if isinstance(value, int | float) and value > 0:
        return int(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)i?[bB]?\s*", str(value))
    if not match:
        raise ValueError(f"memory must look like '2G', '512M' or a number of MB, got {value!r}")
    scale = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}[match.group(2).lower()]
    return max(1, int(float(match.group(1)) * scale))


@dataclass(frozen=True)
class Task:
    path: Path
    config: TaskConfig
    family: str = ""
    split: str = ""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def instruction(self) -> str:
        return (self.path / "instruction.md").read_text()

    @cached_property
    def env(self) -> EnvSpec:
        return parse_dockerfile(self.path / "environment" / "Dockerfile")

    @property
    def solution(self) -> Path | None:
        solve = self.path / "solution" / "solve.sh"
        return solve if solve.is_file() else None


def load_task(path: Path, family: str = "", split: str = "") -> Task:
    """Load and validate one task folder; errors name the task, the file and the line or field."""
    path = Path(path)
    if not path.is_dir():
        raise TaskError(f"{path}: not a task folder (expected a directory with {', '.join(REQUIRED_FILES)})")
    missing = [f for f in REQUIRED_FILES if not (path / f).is_file()]
    if missing:
        raise TaskError(f"task {path.name}: missing {', '.join(missing)} in {path}")
    if not (path / "instruction.md").read_text(errors="replace").strip():
        raise TaskError(f"task {path.name}: {path / 'instruction.md'} is empty")
    config = _load_config(path / "task.toml", path.name)
    task = Task(path=path, config=config, family=family or str(config.metadata.get("category", "")),
                split=split)
    _ = task.env  # parse the Dockerfile now, so a malformed one fails at load time
    return task


def _load_config(toml_path: Path, name: str) -> TaskConfig:
    try:
        data = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"task {name}: {toml_path} is not valid TOML: {e}") from e
    except UnicodeDecodeError as e:
        raise TaskError(f"task {name}: {toml_path} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset "
                        f"{e.start}); task.toml is UTF-8 TOML") from None
    return validate(TaskConfig, data, f"task {name}: {toml_path}", TaskError, name=toml_field)


@dataclass
class TaskSet:
    """A folder of tasks with its splits (from manifest.json when there is one)."""

    root: Path
    tasks: list[Task]

    def split(self, name: str | None) -> list[Task]:
        if name in (None, "", "all"):
            return list(self.tasks)
        if name not in SPLITS:
            raise TaskError(f"unknown split '{name}' (--split); valid: {', '.join(SPLITS)} or all")
        return [t for t in self.tasks if t.split == name]

    @property
    def families(self) -> list[str]:
        return sorted({t.family for t in self.tasks})


def load_taskset(*paths: Path) -> TaskSet:
    """Load task folders: each path is a task folder, or a folder of tasks (with an optional manifest)."""
    tasks: list[Task] = []
    errors: list[str] = []
    for path in map(Path, paths):
        for folder, family, split in find_task_folders(path):
            try:
                tasks.append(load_task(folder, family, split))
            except TaskError as e:
                errors.append(str(e))
    if errors:
        raise TaskError(f"{len(errors)} task folder(s) failed to load:\n" + "\n".join(errors))
    if not tasks:
        raise TaskError(f"no task folders (with task.toml) under {', '.join(map(str, paths))}")
    return TaskSet(root=Path(paths[0]), tasks=tasks)


def find_task_folders(path: Path) -> list[tuple[Path, str, str]]:
    """(folder, family, split) for a task folder, or for each task in a folder of tasks."""
    if (path / "task.toml").is_file() or not path.is_dir():
        return [(path, "", "")]
    manifest = path / MANIFEST
    if not manifest.is_file():
        return [(p.parent, "", "") for p in sorted(path.glob("*/task.toml"))]
    rows = _read_manifest(manifest)
    return [(path / row["name"], row.get("family", ""), row.get("split", "")) for row in rows]


def _read_manifest(manifest: Path) -> list[dict]:
    try:
        rows = json.loads(manifest.read_text())["tasks"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise TaskError(f"{manifest}: expected JSON with a 'tasks' list of {{name, family, split}} ({e})") from e
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "name" not in row:
            raise TaskError(f"{manifest}: tasks[{i}] needs a 'name'")
        if row.get("split", "train") not in SPLITS:
            raise TaskError(f"{manifest}: tasks[{i}] ({row['name']}): split '{row['split']}' is not one of "
                            f"{', '.join(SPLITS)}")
        if not (manifest.parent / row["name"] / "task.toml").is_file():
            raise TaskError(f"{manifest}: tasks[{i}] names '{row['name']}', which has no task.toml")
    return rows
