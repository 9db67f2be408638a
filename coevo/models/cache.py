"""The model cache: one Hugging Face folder per name under `~/.cache/coevo/models` (or $COEVO_MODEL_CACHE).

A folder counts as done only once its marker, `coevo-model.json`, is in it. Work happens in a hidden
staging folder beside it that is renamed into place with the marker already written, so a crash or a
kill mid-conversion never leaves a half folder under the name. One lock file per name serializes pulls.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coevo.models.errors import ModelError

MARKER = "coevo-model.json"
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """`cache_dir`, else $COEVO_MODEL_CACHE, else ~/.cache/coevo/models."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("COEVO_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "coevo" / "models"


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ModelError(f"model name {name!r}: use 1-64 characters a-z, 0-9, '.', '_' or '-', starting with a "
                         "letter or digit (e.g. --name my-model)")
    return name


def marker(folder: Path) -> dict | None:
    """The marker of a finished folder, or None (not there, or not finished)."""
    try:
        return json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None


def finished(root: Path) -> dict[str, tuple[Path, dict]]:
    """Every finished folder in the cache: name -> (folder, marker)."""
    if not root.is_dir():
        return {}
    found = ((p, marker(p)) for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith("."))
    return {p.name: (p, info) for p, info in found if info is not None}


def folder_size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


@contextmanager
def locked(root: Path, name: str) -> Iterator[None]:
    """Hold the name's lock; staging folders left by a crashed run under it are removed first."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for stale in root.glob(f".{name}~*"):  # '~' is in no name, so this is this name's only
            shutil.rmtree(stale, ignore_errors=True)
        yield


@contextmanager
def staging(root: Path, name: str, kind: str) -> Iterator[Path]:
    """A fresh hidden folder in the cache (same filesystem, so the final rename is atomic); always removed."""
    folder = Path(tempfile.mkdtemp(prefix=f".{name}~{kind}-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def publish(staged: Path, root: Path, name: str, info: dict) -> Path:
    """Write the marker last into the staged folder, then rename it to its name (under the name's lock)."""
    _share(staged)
    tmp = staged / (MARKER + ".tmp")
    tmp.write_text(json.dumps(info, indent=1) + "\n")
    tmp.rename(staged / MARKER)
    target = root / name
    if target.exists():  # unfinished, or from an older recipe: moved aside first, so the name is never half
        old = Path(tempfile.mkdtemp(prefix=f".{name}~old-", dir=root))
        target.rename(old / name)
        staged.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        staged.rename(target)
    return target


def _share(folder: Path) -> None:
    """mkdtemp (and safetensors) make owner-only modes; a finished folder gets the umask's, like any other."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for f in folder.rglob("*"):
        f.chmod((0o777 if f.is_dir() else 0o666) & ~umask)
