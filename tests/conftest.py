"""Shared fixtures: small Harbor task folders written on the fly (real files, real sandboxes)."""

from __future__ import annotations

from pathlib import Path

import pytest

TASK_TOML = """version = "1.0"
[metadata]
category = "demo"
[verifier]
timeout_sec = 20.0
[agent]
timeout_sec = 60.0
[environment]
cpus = 1
memory = "1G"
"""

DEFAULT_TEST = """#!/bin/bash
if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def write_task(root: Path, name: str = "demo", *, files: dict[str, str] | None = None,
               dockerfile: str = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY app/ /app/\n",
               test_sh: str = DEFAULT_TEST, solve_sh: str = "echo 42 > /app/answer.txt\n",
               task_toml: str = TASK_TOML, instruction: str = "Write 42 to /app/answer.txt.\n") -> Path:
    """A Harbor task folder. `files` are extra files relative to the task folder."""
    task = root / name
    contents = {
        "instruction.md": instruction, "task.toml": task_toml, "environment/Dockerfile": dockerfile,
        "environment/app/input.txt": "hello\n", "tests/test.sh": test_sh, "solution/solve.sh": solve_sh,
        **(files or {}),
    }
    for rel, text in contents.items():
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_text(text)
    return task


@pytest.fixture
def make_task(tmp_path):
    return lambda name="demo", **kw: write_task(tmp_path / "tasks", name, **kw)


@pytest.fixture
def task(make_task):
    from coevo.tasks import load_task

    return load_task(make_task())


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """A small generated suite with all three splits (train 38, dev 19, test 9)."""
    from coevo.tasks.generate import generate_suite

    out = tmp_path_factory.mktemp("suite") / "tasks"
    generate_suite(out, seed=0, per_family=3)
    return out


@pytest.fixture(scope="session")
def moe_suite(tmp_path_factory):
    """A generated suite with one task per family: the tiny models' vocabulary (and all three splits)."""
    from coevo.tasks.generate import generate_suite

    out = tmp_path_factory.mktemp("moe-suite") / "tasks"
    generate_suite(out, seed=0, per_family=1)
    return out


@pytest.fixture(scope="session")
def tiny_moe(moe_suite, tmp_path_factory):
    """The tiny Mixture-of-Experts model (`coevo init-model --moe`: Qwen3-MoE, 8 experts, top-2), built once."""
    from coevo.train.model import build_tiny_model

    prompts = Path(__file__).resolve().parents[1] / "prompts"
    return build_tiny_model(tmp_path_factory.mktemp("tiny-moe"), moe_suite, seed=0, prompts_dir=prompts, moe=True)


@pytest.fixture(scope="session")
def tiny_dense(moe_suite, tmp_path_factory):
    """The dense tiny model on the same vocabulary as `tiny_moe`."""
    from coevo.train.model import build_tiny_model

    prompts = Path(__file__).resolve().parents[1] / "prompts"
    return build_tiny_model(tmp_path_factory.mktemp("tiny-dense"), moe_suite, seed=0, prompts_dir=prompts)


@pytest.fixture(scope="session")
def coin(tmp_path_factory):
    """Two tasks with random partial credit (tests/routing_helpers.py): GRPO groups with real advantages."""
    from routing_helpers import coin_tasks

    return coin_tasks(tmp_path_factory.mktemp("coin") / "tasks")
