"""TaskSpec: one generated task instance, and how it becomes a Harbor task folder on disk.

A family function draws a TaskSpec from its rng; `write_task` turns it into
instruction.md, task.toml, environment/ (Dockerfile + /app seed), tests/ (test.sh, verify.py,
expected.json) and solution/solve.sh. Output depends only on the spec, so a seed gives
byte-identical folders (fixed file modes, sorted JSON, no timestamps).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from pydantic import BaseModel, Field

TEMPLATE = (Path(__file__).with_name("verifier_template.py")).read_text()

TASK_TOML = """\
version = "1.0"

[metadata]
author_name = "coevo generator"
difficulty = "{difficulty}"
category = "{family}"
tags = [{tags}]

[verifier]
timeout_sec = 30.0

[agent]
timeout_sec = 120.0

[environment]
cpus = 1
memory = "1G"
"""

TEST_SH = """\
#!/bin/bash
# verify.py writes /logs/verifier/reward.json (per check) and reward.txt (1 only if all pass).
mkdir -p /logs/verifier
/usr/bin/python3 /tests/verify.py || [ -s /logs/verifier/reward.txt ] || echo 0 > /logs/verifier/reward.txt
"""


class TaskSpec(BaseModel):
    """Everything that differs between two generated tasks."""

    instruction: str
    """The task statement; paths are absolute, under /app."""
    solution: list[str]
    """Lines of solution/solve.sh, run from /app. Each line is a complete command on its own, so the
    lines can also be replayed one by one as agent actions."""
    checks: dict[str, str]
    """Check name -> Python expression that is true when the check passes; it is evaluated in
    verify.py, where the template's helpers (read, lines, answer, run, mode, ...) and E are in scope."""
    files: dict[str, str | bytes] = Field(default_factory=dict)
    """Seed files, path relative to /app -> content."""
    modes: dict[str, int] = Field(default_factory=dict)
    """File modes of seed files that must not be 0644 (path relative to /app)."""
    keep: list[str] = Field(default_factory=list)
    """Seed files the agent must leave untouched; adds an `inputs_unchanged` check."""
    expected: dict = Field(default_factory=dict)
    """Data the checks read as E[...]; written to tests/expected.json, out of the agent's sight."""
    helpers: str = ""
    """Extra Python definitions for verify.py, for checks that do not fit in one expression."""
    env: dict[str, str] = Field(default_factory=dict)
    """ENV lines of the Dockerfile: the agent's environment."""
    tags: list[str] = Field(default_factory=list)
    difficulty: str = "easy"


def write_task(spec: TaskSpec, folder: Path, family: str) -> None:
    _write(folder / "instruction.md", spec.instruction.strip() + "\n")
    tags = ", ".join(json.dumps(t) for t in [family, *spec.tags])
    _write(folder / "task.toml", TASK_TOML.format(difficulty=spec.difficulty, family=family, tags=tags))
    _write_environment(spec, folder / "environment")
    _write(folder / "tests" / "test.sh", TEST_SH, 0o755)
    _write(folder / "tests" / "verify.py", verifier_source(spec))
    expected = dict(spec.expected, keep={f"/app/{p}": _sha(spec.files[p]) for p in spec.keep})
    _write(folder / "tests" / "expected.json", json.dumps(expected, indent=1, sort_keys=True) + "\n")
    _write(folder / "solution" / "solve.sh", "#!/bin/bash\n" + "\n".join(spec.solution) + "\n", 0o755)


def verifier_source(spec: TaskSpec) -> str:
    checks = dict(spec.checks)
    if spec.keep:
        checks["inputs_unchanged"] = "unchanged()"
    body = [spec.helpers.strip() + "\n"] if spec.helpers.strip() else []
    body += [f"check({name!r}, lambda: {expr})" for name, expr in checks.items()]
    return TEMPLATE + "\n".join(body) + "\nfinish()\n"


def targz(files: dict[str, str]) -> bytes:
    """A .tar.gz of `files` that is byte-identical for the same input (fixed mtime, owner, order)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for path in sorted(files):
            data = files[path].encode()
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _write_environment(spec: TaskSpec, env_dir: Path) -> None:
    lines = ["FROM debian:bookworm-slim", "WORKDIR /app"]
    lines += [f"ENV {key}={json.dumps(value)}" for key, value in spec.env.items()]
    if spec.files:
        lines.append("COPY app/ /app/")
    _write(env_dir / "Dockerfile", "\n".join(lines) + "\n")
    for rel, content in sorted(spec.files.items()):
        _write(env_dir / "app" / rel, content, spec.modes.get(rel, 0o644))


def _write(path: Path, content: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    path.chmod(mode)


def _sha(content: str | bytes) -> str:
    return hashlib.sha256(content.encode() if isinstance(content, str) else content).hexdigest()
