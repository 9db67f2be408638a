"""The bundled-suite generator: deterministic, big enough, split right, and every folder complete.

One seed-0 suite is written per module; an end-to-end check runs one instance of each family in a
real sandbox (reference solution scores 1, doing nothing scores 0).
"""

from __future__ import annotations

import inspect
import json
import shutil
import subprocess
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from coevo.errors import TaskError
from coevo.tasks.generate import FAMILIES, HELD_OUT, generate_suite

REQUIRED = ["instruction.md", "task.toml", "environment/Dockerfile", "tests/test.sh", "tests/verify.py",
            "tests/expected.json", "solution/solve.sh"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("suite")
    return out, generate_suite(out, seed=0)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_is_byte_identical_and_another_seed_differs(tmp_path):
    rows = generate_suite(tmp_path / "a", seed=0, per_family=2)
    generate_suite(tmp_path / "b", seed=0, per_family=2)
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    generate_suite(tmp_path / "c", seed=1, per_family=2)
    same = [r["name"] for r in rows if (tmp_path / "a" / r["name"] / "instruction.md").read_text()
            == (tmp_path / "c" / r["name"] / "instruction.md").read_text()]
    assert same == [], f"seed 1 repeats seed 0's instructions: {same}"


def test_the_bundled_suite_is_the_seed_0_suite(suite):
    """tasks/ in the repository is what `coevo tasks generate --seed 0` writes; regenerate it after a change."""
    out, _ = suite
    bundled = Path(__file__).parents[1] / "tasks"
    assert snapshot(bundled) == snapshot(out)


def test_size_and_families(suite):
    out, rows = suite
    per_family = inspect.signature(generate_suite).parameters["per_family"].default
    assert Counter(r["family"] for r in rows) == dict.fromkeys(FAMILIES, per_family)
    assert len(rows) >= 200 and len(FAMILIES) >= 15  # the floor the suite is built to: enough to train on
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tasks"] == rows and manifest["seed"] == 0
    assert manifest["held_out_families"] == HELD_OUT and set(HELD_OUT) <= set(FAMILIES)


def test_splits_are_60_20_20_and_held_out_families_only_in_test(suite):
    _, rows = suite
    counts = Counter(r["split"] for r in rows)
    for split, share in {"train": 0.6, "dev": 0.2, "test": 0.2}.items():
        assert abs(counts[split] / len(rows) - share) < 0.03, counts
    for row in rows:
        if row["family"] in HELD_OUT:
            assert row["split"] == "test", row
    seen = {r["family"] for r in rows if r["split"] in ("train", "dev")}
    assert seen == set(FAMILIES) - set(HELD_OUT)


def test_instances_of_a_family_differ(suite):
    out, rows = suite
    for family in FAMILIES:
        texts = [(out / r["name"] / "instruction.md").read_text() for r in rows if r["family"] == family]
        assert len(set(texts)) == len(texts), family


def test_every_folder_is_complete_and_well_formed(suite):
    out, rows = suite
    for row in rows:
        task = out / row["name"]
        assert [f for f in REQUIRED if not (task / f).is_file()] == [], task
        config = tomllib.loads((task / "task.toml").read_text())
        assert config["metadata"]["category"] == row["family"]
        docker = (task / "environment" / "Dockerfile").read_text().splitlines()
        assert {line.split()[0] for line in docker} <= {"FROM", "WORKDIR", "COPY", "ENV"}, task
        assert ("COPY app/ /app/" in docker) == (task / "environment" / "app").is_dir(), task
        compile((task / "tests" / "verify.py").read_text(), str(task / "tests" / "verify.py"), "exec")


def test_each_solution_line_is_a_complete_command(suite):
    """Solutions are replayed as agent actions, one line per command: no heredocs or open quotes."""
    out, rows = suite
    for row in rows:
        lines = (out / row["name"] / "solution" / "solve.sh").read_text().splitlines()[1:]
        assert 1 <= len(lines) <= 3, row
        for line in lines:
            result = subprocess.run(["bash", "-n", "-c", line], capture_output=True, text=True, check=False)
            assert result.returncode == 0, f"{row['name']}: {line!r}: {result.stderr}"


def test_regenerating_removes_only_what_it_wrote(tmp_path):
    generate_suite(tmp_path, seed=0, per_family=2)
    (tmp_path / "mine").mkdir()
    rows = generate_suite(tmp_path, seed=0, per_family=1)
    folders = {p.name for p in tmp_path.iterdir() if p.is_dir()}
    assert folders == {r["name"] for r in rows} | {"mine"}


def test_a_folder_it_did_not_write_is_never_overwritten(tmp_path):
    (tmp_path / "grep-count-000").mkdir()
    (tmp_path / "grep-count-000" / "notes.txt").write_text("mine\n")
    with pytest.raises(TaskError, match="grep-count-000"):
        generate_suite(tmp_path, seed=0, per_family=1)
    assert (tmp_path / "grep-count-000" / "notes.txt").read_text() == "mine\n"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the local sandbox needs bubblewrap")
def test_one_instance_per_family_passes_end_to_end(suite):
    from coevo.tasks.check import check_task

    out, _ = suite
    folders = [out / f"{family}-000" for family in FAMILIES]
    with ThreadPoolExecutor(max_workers=12) as pool:
        rows = list(pool.map(check_task, folders))
    assert [r.as_dict() for r in rows if not r.ok] == []
