"""Task folders: the Harbor layout loads, and bad input gets an error naming the task, file and field/line."""

from __future__ import annotations

import json

import pytest

from coevo.errors import NeedsDockerError, TaskError
from coevo.sandbox import make_sandbox
from coevo.tasks import load_task, load_taskset


def test_harbor_task_loads(make_task):
    task = load_task(make_task("hello"))
    assert task.name == "hello" and task.family == "demo"
    assert task.config.verifier.timeout_sec == 20 and task.config.environment.memory_mb == 1024
    assert "42" in task.instruction and task.solution is not None


@pytest.mark.parametrize("missing", ["instruction.md", "task.toml", "environment/Dockerfile", "tests/test.sh"])
def test_missing_file_is_named(make_task, missing):
    path = make_task("broken")
    (path / missing).unlink()
    with pytest.raises(TaskError, match=rf"task broken: missing {missing}"):
        load_task(path)


def test_malformed_toml_names_the_line(make_task):
    path = make_task("badtoml", task_toml="[verifier]\ntimeout_sec = \n")
    with pytest.raises(TaskError, match=r"task badtoml: .*task.toml is not valid TOML.*line 2"):
        load_task(path)


@pytest.mark.parametrize(("toml", "field"), [
    ('[verifier]\ntimeout_sec = "soon"\n', r"\[verifier\] timeout_sec"),
    ("[agent]\ntimeout_sec = -5\n", r"\[agent\] timeout_sec"),
    ('[environment]\nmemory = "lots"\n', r"memory must look like '2G'"),
])
def test_wrong_field_is_named(make_task, toml, field):
    with pytest.raises(TaskError, match=field):
        load_task(make_task("badfield", task_toml=toml))


def test_memory_forms(make_task):
    assert load_task(make_task("m1", task_toml='[environment]\nmemory = "2G"\n')).config.environment.memory_mb == 2048
    assert load_task(make_task("m2", task_toml="[environment]\nmemory_mb = 512\n")).config.environment.memory_mb == 512


@pytest.mark.parametrize(("dockerfile", "reason"), [
    ("FROM debian:bookworm\nWORKDIR /app\nRUN apt-get install -y jq\n", r"line 3: RUN apt-get install -y jq"),
    ("FROM alpine:3.19\nWORKDIR /app\n", r"line 1: FROM alpine:3.19 \(base image 'alpine:3.19' is not Debian"),
    ("FROM debian\nCOPY app/input.txt /usr/local/bin/\n", r"line 2: .*outside /app"),
    ("FROM debian\nWORKDIR /app/../etc\n", r"line 2: WORKDIR .*outside /app"),
])
def test_dockerfile_that_needs_docker_names_the_line(make_task, dockerfile, reason):
    task = load_task(make_task("needsdocker", dockerfile=dockerfile))
    with pytest.raises(NeedsDockerError, match=reason):
        make_sandbox(task)


@pytest.mark.parametrize(("dockerfile", "message"), [
    ("WORKDIR /app\n", "no FROM line"),
    ("FROM debian\nFROBNICATE /app\n", "line 2: unknown instruction 'FROBNICATE'"),
    ("FROM debian\nCOPY nothere.txt /app/\n", "line 2: COPY source 'nothere.txt' not found"),
    ("FROM debian\nCOPY ../instruction.md /app/\n", "line 2: COPY source .* outside the build context"),
    ("FROM debian\nENV =oops\n", "line 2: ENV expects KEY=value"),
])
def test_malformed_dockerfile_names_the_line(make_task, dockerfile, message):
    with pytest.raises(TaskError, match=message):
        load_task(make_task("baddocker", dockerfile=dockerfile))


def test_dockerfile_continuations_and_env_forms(make_task):
    dockerfile = "FROM debian\n# comment\nENV A=1 \\\n    B=\"two words\"\nENV LEGACY some value\n"
    env = load_task(make_task("envs", dockerfile=dockerfile)).env.env
    assert env == {"A": "1", "B": "two words", "LEGACY": "some value"}


def test_manifest_splits_and_errors(make_task, tmp_path):
    for name in ["a", "b", "c"]:
        make_task(name)
    root = tmp_path / "tasks"
    rows = [{"name": "a", "family": "f", "split": "train"}, {"name": "b", "family": "f", "split": "dev"},
            {"name": "c", "family": "g", "split": "test"}]
    (root / "manifest.json").write_text(json.dumps({"tasks": rows}))
    taskset = load_taskset(root)
    assert [t.name for t in taskset.split("dev")] == ["b"] and taskset.families == ["f", "g"]
    with pytest.raises(TaskError, match="unknown split 'val'"):
        taskset.split("val")
    rows[2]["split"] = "holdout"
    (root / "manifest.json").write_text(json.dumps({"tasks": rows}))
    with pytest.raises(TaskError, match=r"manifest.json: tasks\[2\] \(c\): split 'holdout'"):
        load_taskset(root)
    (root / "manifest.json").write_text(json.dumps({"tasks": [{"name": "zzz"}]}))
    with pytest.raises(TaskError, match="names 'zzz', which has no task.toml"):
        load_taskset(root)


def test_taskset_reports_every_broken_task(make_task, tmp_path):
    make_task("good")
    (make_task("bad1") / "task.toml").write_text("[[[")
    (make_task("bad2") / "instruction.md").write_text("  \n")
    with pytest.raises(TaskError, match=r"(?s)2 task folder\(s\) failed.*bad1.*bad2.*is empty"):
        load_taskset(tmp_path / "tasks")
