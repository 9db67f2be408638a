"""What the local backend can take from a task's Dockerfile: the /app seed, the workdir and ENV.

The local sandbox shares the host's (Debian) userland, so it honours only the instructions that
describe files and environment. Anything that needs an image build (RUN, ADD, COPY --from, a
non-Debian base, files outside /app) is kept as a reason, with its line, and the task is reported
as needing the docker backend rather than run half-prepared.
"""

from __future__ import annotations

import glob
import posixpath
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from coevo.errors import NeedsDockerError, TaskError

APP = PurePosixPath("/app")
# Bases whose userland is close enough to the Debian host that the local backend can stand in.
DEBIAN_LIKE = ("debian", "ubuntu", "python", "buildpack-deps")
# Instructions that only describe metadata or the container's entry: nothing to seed.
IGNORED = {"LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "MAINTAINER", "HEALTHCHECK", "STOPSIGNAL",
           "VOLUME", "USER", "ARG", "SHELL", "ONBUILD"}


@dataclass
class Copy:
    sources: list[Path]
    dest: PurePosixPath
    """Absolute path inside the sandbox, under /app."""
    into_dir: bool
    """Dest is a directory (ends with '/', or several sources): sources land inside it."""


@dataclass
class EnvSpec:
    """The parts of a Dockerfile the local backend honours."""

    dockerfile: Path
    base: str = ""
    workdir: PurePosixPath = APP
    copies: list[Copy] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    needs_docker: list[str] = field(default_factory=list)
    """One entry per line the local backend cannot honour: 'line N: <text> (<why>)'."""

    def require_local(self, task_name: str) -> None:
        if self.needs_docker:
            raise NeedsDockerError(
                f"task {task_name}: {self.dockerfile} needs the docker backend:\n  "
                + "\n  ".join(self.needs_docker)
            )


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash continuations; drop comments and blanks. Returns (first line number, text)."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if not buf:
            start = number
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        out.append((start, buf + line))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def parse_dockerfile(path: Path) -> EnvSpec:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"{path}: cannot read the Dockerfile ({e})") from e
    spec = EnvSpec(dockerfile=path)
    for number, line in _logical_lines(text):
        word, _, rest = line.partition(" ")
        instruction = word.upper()
        try:
            why = _apply(spec, instruction, rest.strip(), path.parent)
        except ValueError as e:
            raise TaskError(f"{path}, line {number}: {e}") from e
        if why:
            spec.needs_docker.append(f"line {number}: {line} ({why})")
    if not spec.base:
        raise TaskError(f"{path}: no FROM line; a Dockerfile starts with 'FROM <image>'")
    return spec


def _apply(spec: EnvSpec, instruction: str, rest: str, context: Path) -> str | None:
    """Fold one instruction into `spec`; return why it needs docker, or None."""
    if instruction == "FROM":
        spec.base = rest.split()[0] if rest else ""
        name = spec.base.split("@")[0].split(":")[0].rsplit("/", 1)[-1]
        if not any(name.startswith(d) for d in DEBIAN_LIKE):
            return f"base image '{spec.base}' is not Debian-like ({', '.join(DEBIAN_LIKE)})"
        return None
    if instruction == "WORKDIR":
        spec.workdir = _join(spec.workdir, rest)
        return None if _under_app(spec.workdir) else "WORKDIR outside /app"
    if instruction == "ENV":
        spec.env.update(_parse_env(rest))
        return None
    if instruction == "COPY":
        return _parse_copy(spec, rest, context)
    if instruction in IGNORED:
        return None
    if instruction in {"RUN", "ADD"}:
        return f"{instruction} needs an image build"
    raise ValueError(f"unknown instruction '{instruction}'")


def _parse_env(rest: str) -> dict[str, str]:
    parts = shlex.split(rest)
    if parts and "=" not in parts[0]:  # legacy form: ENV KEY value with spaces
        return {parts[0]: " ".join(parts[1:])}
    env = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError(f"ENV expects KEY=value, got '{part}'")
        env[key] = value
    return env


def _parse_copy(spec: EnvSpec, rest: str, context: Path) -> str | None:
    args = shlex.split(rest)
    flags = [a for a in args if a.startswith("--")]
    args = [a for a in args if not a.startswith("--")]
    if any(f.startswith("--from") for f in flags):
        return "COPY --from needs an image build"
    if len(args) < 2:
        raise ValueError("COPY needs at least one source and a destination")
    dest = _join(spec.workdir, args[-1])
    if not _under_app(dest):
        return f"destination {dest} is outside /app"
    sources: list[Path] = []
    for pattern in args[:-1]:
        matches = sorted(glob.glob(str(context / pattern)))
        if not matches:
            raise ValueError(f"COPY source '{pattern}' not found in {context}")
        for match in map(Path, matches):
            if not match.resolve().is_relative_to(context.resolve()):
                raise ValueError(f"COPY source '{pattern}' is outside the build context {context}")
            sources.append(match)
    into_dir = args[-1].endswith("/") or len(sources) > 1
    spec.copies.append(Copy(sources=sources, dest=dest, into_dir=into_dir))
    return None


def _join(base: PurePosixPath, path: str) -> PurePosixPath:
    """Resolve like the image build would, so that '/app/../etc' is not taken for a path in /app."""
    return PurePosixPath(posixpath.normpath(str(base / path)))


def _under_app(path: PurePosixPath) -> bool:
    return path == APP or APP in path.parents
