"""Evolved templates as files of the run folder, each with its lineage.

    runs/<name>/prompts/                 the base harness's templates, copied: the prompts folder of every
                                         harness of a run whose space evolves text
    runs/<name>/prompts/evolved/
      system-1a2b3c4d5e.j2               an evolved text, named by its content (the same text, one file)
      system-1a2b3c4d5e.json             its lineage: parent template, unified diff, phase, reflection LM
    runs/<name>/gepa/<phase>-<slot>/     GEPA's own state (resumable), rejected.jsonl and result.json

A template name in a pair's overrides (`templates.system: evolved/system-1a2b3c4d5e.j2`) is then a plain
choice, resolved against the run's prompts folder by every harness of the run, the bundle's included.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

EVOLVED = "evolved"


def run_prompts(run_dir: Path) -> Path:
    return Path(run_dir) / "prompts"


def with_run_prompts(base, space, run_dir: Path):
    """`base`, when the space evolves a template, with its templates copied into the run folder and read
    from there, so that evolved templates written beside them resolve like any other (the copy is
    refreshed; evolved/ is kept). Otherwise `base` itself."""
    from coevo.search.instructions.spec import EvolveParam

    if not any(isinstance(p, EvolveParam) for p in space.params):
        return base
    target = run_prompts(run_dir)
    shutil.copytree(base.prompts_path, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(EVOLVED))
    return base.with_overrides({"prompts_dir": str(target.resolve())})


def prompts_of(run_dir: Path) -> dict:
    """The override that reads a run's templates from its own prompts folder, when it has one (its space
    evolved text); else nothing."""
    target = run_prompts(run_dir)
    return {"prompts_dir": str(target.resolve())} if (target / EVOLVED).is_dir() else {}


def evolved_lineage(run_dir: Path, overrides: dict) -> dict[str, list[dict]]:
    """Template name -> its ancestry, newest first (name, parent, diff, phase of each evolved step), for
    each evolved template a pair's overrides name."""
    found = {}
    for value in overrides.values():
        chain, name = [], value
        while isinstance(name, str) and (lineage := read_lineage(run_prompts(run_dir), name)) is not None:
            if lineage in chain:
                break
            chain.append(lineage)
            name = lineage["parent"]
        if chain:
            found[value] = chain
    return found


class TemplateStore:
    """Writes candidate texts of one template slot into the run's prompts folder and records where each
    came from. Texts the run already knows by another name (the base's, the incumbent's) keep it."""

    def __init__(self, prompts_dir: Path, slot: str, phase: str, record_dir: Path):
        self.prompts_dir, self.slot, self.phase, self.record_dir = Path(prompts_dir), slot, phase, Path(record_dir)
        self.names: dict[str, str] = {}
        """Text -> template name, for the texts seen so far."""

    def known(self, name: str) -> str:
        """Register an existing template (e.g. GEPA's seed) under its own name; returns its text."""
        text = (self.prompts_dir / name).read_text()
        self.names.setdefault(text, name)
        return text

    def write(self, text: str) -> str:
        """The template name of `text`, writing its file (once) when the run does not have it yet."""
        if text in self.names:
            return self.names[text]
        digest = hashlib.sha256(text.encode()).hexdigest()[:10]
        name = f"{EVOLVED}/{self.slot}-{digest}.j2"
        path = self.prompts_dir / name
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, text)
        self.names[text] = name
        return name

    def forget(self, text: str) -> None:
        """Remove a written text that turned out unusable (it never became a candidate)."""
        name = self.names.pop(text, None)
        if name and name.startswith(EVOLVED + "/") and not self.lineage_path(name).is_file():
            (self.prompts_dir / name).unlink(missing_ok=True)

    def lineage_path(self, name: str) -> Path:
        return (self.prompts_dir / name).with_suffix(".json")

    def record(self, child: str, parent_text: str, **info: Any) -> dict:
        """The lineage of a proposed text: its parent's name and the diff from the parent."""
        text = (self.prompts_dir / child).read_text()
        parent = self.names.get(parent_text, "?")
        diff = "".join(difflib.unified_diff(parent_text.splitlines(keepends=True), text.splitlines(keepends=True),
                                            fromfile=parent, tofile=child))
        lineage = {"name": child, "parent": parent, "slot": self.slot, "phase": self.phase, "diff": diff,
                   "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **info}
        path = self.lineage_path(child)
        if not path.is_file():  # the first proposal of a text is its lineage
            _atomic_write(path, json.dumps(lineage, indent=1) + "\n")
        return lineage

    def reject(self, parent_text: str, reason: str, text: str | None = None) -> None:
        """A proposal that did not become a candidate, and why (the search goes on without it)."""
        self.record_dir.mkdir(parents=True, exist_ok=True)
        row = {"parent": self.names.get(parent_text, "?"), "reason": reason[:2000], "text": text,
               "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        with (self.record_dir / "rejected.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")

    def rejected(self) -> list[dict]:
        path = self.record_dir / "rejected.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line] if path.is_file() else []


def read_lineage(prompts_dir: Path, name: str) -> dict | None:
    path = (Path(prompts_dir) / name).with_suffix(".json")
    return json.loads(path.read_text()) if name.startswith(EVOLVED + "/") and path.is_file() else None


def _atomic_write(path: Path, text: str) -> None:
    staging = path.with_name(path.name + ".tmp")
    staging.write_text(text)
    staging.replace(path)
