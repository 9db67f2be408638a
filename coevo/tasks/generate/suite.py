"""Writing a whole suite: every family's instances as task folders, plus manifest.json with the splits.

Everything is drawn from `random.Random` seeded by (seed, family, instance): one seed, one suite,
byte for byte.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

from coevo.errors import TaskError
from coevo.tasks.generate.families import DEV_FRACTION, FAMILIES, HELD_OUT, TEST_FRACTION
from coevo.tasks.generate.writer import TaskSpec, write_task

MANIFEST = "manifest.json"


def generated_manifest(folder: Path) -> dict | None:
    """The manifest of a suite this generator wrote (so more instances can be drawn), else None."""
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("generator") == "coevo tasks generate" else None


def generate_suite(out: Path, seed: int = 0, per_family: int = 13) -> list[dict]:
    """Write every family's instances as Harbor task folders under `out` plus out/manifest.json; return the
    manifest rows."""
    out = Path(out)
    rows, specs = [], {}
    for family, draw in FAMILIES.items():
        splits = _splits(family, seed, per_family)
        for i, spec in enumerate(_instances(family, draw, seed, per_family)):
            name = f"{family}-{i:03d}"
            specs[name] = (family, spec)
            rows.append({"name": name, "family": family, "split": splits[i]})
    previous = _previous(out)
    clashes = sorted(n for n in specs if (out / n).exists() and n not in previous)
    if clashes:
        raise TaskError(f"{out}: {', '.join(clashes[:5])} exist but are not listed in "
                        f"{out / MANIFEST}; move them away, or generate into another folder")
    for name in previous:
        shutil.rmtree(out / name)
    # The manifest goes first: if writing is interrupted, the next run still knows what to clean up.
    manifest = {"generator": "coevo tasks generate", "seed": seed, "held_out_families": HELD_OUT,
                "tasks": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    for name, (family, spec) in specs.items():
        write_task(spec, out / name, family)
    return rows


def _instances(family: str, draw: Callable[[random.Random], TaskSpec], seed: int, n: int) -> list[TaskSpec]:
    """n distinct instances: a draw that repeats an earlier instruction is drawn again, with a new rng."""
    specs: list[TaskSpec] = []
    seen: set[str] = set()
    for i in range(n):
        for attempt in range(100):
            spec = draw(random.Random(f"{seed}:{family}:{i}:{attempt}"))
            if spec.instruction not in seen:
                break
        else:
            raise RuntimeError(f"family {family}: no new instance after 100 draws; its space is too small")
        seen.add(spec.instruction)
        specs.append(spec)
    return specs


def _splits(family: str, seed: int, n: int) -> list[str]:
    """Split of each instance. Held-out families are all test; the others carry the rest of the 20% test
    share, so that the whole suite is about 60/20/20."""
    if family in HELD_OUT:
        return ["test"] * n
    inside = len(FAMILIES) - len(HELD_OUT)
    n_dev = round(n * DEV_FRACTION * len(FAMILIES) / inside)
    n_test = max(0, round(n * (TEST_FRACTION * len(FAMILIES) - len(HELD_OUT)) / inside))
    labels = ["dev"] * n_dev + ["test"] * n_test
    labels += ["train"] * (n - len(labels))
    random.Random(f"{seed}:{family}:splits").shuffle(labels)
    return labels


def _previous(out: Path) -> list[str]:
    """Task folders an earlier run wrote here (those its manifest lists and that still exist)."""
    manifest = out / MANIFEST
    if not manifest.is_file():
        return []
    try:
        rows = json.loads(manifest.read_text())["tasks"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise TaskError(f"{manifest}: not a manifest this generator wrote ({e}); remove it to "
                        "regenerate") from e
    # A name that is not a plain child of `out` (say '../x') was not written by us: never delete it.
    return [r["name"] for r in rows if (out / r["name"]).parent == out and (out / r["name"]).is_dir()]
