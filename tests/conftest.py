"""Shared fixtures: small Harbor task folders written on the fly (real files, real sandboxes), tiny models,
and two finished searches that several modules read (a small nested one, and the tiny alternating loop)."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass
class NestedRun:
    folder: Path
    """The run folder."""
    state: object
    """Its RunState, done."""
    trials: list
    """n1's Optuna trials that trained an adapter (FrozenTrial)."""
    inputs: object
    """The search's inputs (space, base harness), to resolve a trial's params into a harness."""


@pytest.fixture(scope="session")
def nested_run(tmp_path_factory) -> NestedRun:
    """One small real nested search (search_helpers.NESTED_FIELDS: the tiny model built and trained in the
    run, real sandboxes, sqlite Optuna and MLflow), run once and read by every test that only reads a
    finished nested run: what it trained and tracked, and the commands run on it afterwards."""
    import optuna
    from search_helpers import NESTED_FIELDS, NESTED_SPACE, write_config

    from coevo.search.config import load_config
    from coevo.search.run import Search
    from coevo.tasks.generate import generate_suite

    folder = tmp_path_factory.mktemp("nested")
    generate_suite(folder / "tasks", seed=0, per_family=3)  # the `suite` fixture's tasks
    config = load_config(write_config(folder, folder / "tasks", **NESTED_FIELDS))
    Path(config.space).write_text(NESTED_SPACE)
    search = Search(config, log=lambda line: None)
    state = search.run()
    study = optuna.load_study(study_name="nested.n1", storage=f"sqlite:///{config.run_dir / 'optuna.db'}")
    trials = [t for t in study.trials if "adapter" in t.user_attrs]
    assert state.done and len(trials) == 3
    return NestedRun(config.run_dir, state, trials, search.ctx.inputs)


@dataclass
class TinyRun:
    config: object
    """The loaded SearchConfig (search_helpers.tiny_coevolution_config)."""
    state: object
    """Its RunState, done."""


@pytest.fixture(scope="session")
def tiny_coevolution(tmp_path_factory) -> TinyRun:
    """The alternating loop on the real tiny model (w0 -> h -> w, the arms, the final table), run once for
    the tests that read it (tests/test_search_coevolution.py) or run it again (tests/test_search_repeat.py)."""
    from search_helpers import tiny_coevolution_config

    from coevo.search.config import load_config
    from coevo.search.run import Search
    from coevo.tasks.generate import generate_suite

    folder = tmp_path_factory.mktemp("tiny-coevolution")
    generate_suite(folder / "tasks", seed=0, per_family=3)
    config = load_config(tiny_coevolution_config(folder, folder / "tasks"))
    return TinyRun(config, Search(config, log=lambda line: None).run())
