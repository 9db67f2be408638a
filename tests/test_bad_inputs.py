"""Every bad input of benchmarks/bad_inputs.py (harness YAML, templates, search spaces and configs, task
folders, Dockerfiles, bundles, GGUF files, CLI arguments, serve requests) gets a message that names the
file (or the request) and the field or line, and no traceback. The CLI runs in this process through
typer's runner (the benchmark runs the same rows in subprocesses); serve rows go to a real `coevo serve`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _load_benchmark(name: str):
    """The benchmark module by its file, never through sys.path, so no benchmark's name can shadow a package
    (a benchmarks/gepa.py once hid the `gepa` that dspy imports, for every test after this one)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


_bad_inputs = _load_benchmark("bad_inputs")
CASES, World, run_case = _bad_inputs.CASES, _bad_inputs.World, _bad_inputs.run_case

KNOWN: dict[str, str] = {}
"""Rows still not located, each with why; strict, so a fix makes its row fail here until it is removed."""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    world = World(tmp_path_factory.mktemp("bad-inputs"))
    yield world
    if world.server is not None:
        world.server.terminate()
        world.server.wait(30)


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN[c.name], strict=True))
                                  if c.name in KNOWN else c for c in CASES],
                         ids=[f"{c.kind}:{c.name}" for c in CASES])
def test_a_bad_input_is_located_and_never_a_traceback(world, case):
    result = run_case(world, case, in_process=True)
    assert not result.traceback, result.message[-3000:]
    assert result.located, f"the message does not name {result.missing}:\n{result.message[-3000:]}"


def test_the_table_is_the_size_the_issue_asks_for():
    kinds = {c.kind for c in CASES}
    assert len(CASES) >= 60 and {"harness", "template", "space", "config", "task", "dockerfile", "bundle", "gguf",
                                 "cli", "serve"} <= kinds
