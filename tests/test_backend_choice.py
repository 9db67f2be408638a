"""Choosing a sandbox backend from the command line: `--backend local|docker|auto` and `--image-map` on
`coevo eval` and `coevo tasks check`, against a real engine (no skip: .ci/setup starts one).

The Harbor fixture needs an image build (RUN apt-get, RUN pip, a non-root USER); a bundled task does
not. Commands that must see another DOCKER_HOST run in a subprocess, since the engine client is made
once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coevo.cli import app
from coevo.sandbox import backends_for
from coevo.sandbox.images import BASE_TAG
from coevo.tasks import load_task

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
FIXTURE = FIXTURES / "harbor-apt-pip-user"
# Nothing can be pulled here: the fixture's FROM is the base `coevo sandbox base` built.
IMAGE_MAP = ["--image-map", f"python:3.12-slim={BASE_TAG}"]
HARNESS = str(REPO / "harnesses" / "mini_bash.yaml")


def bundled_task() -> Path:
    folders = sorted(p.parent for p in (REPO / "tasks").glob("*/task.toml"))
    if not folders:
        pytest.skip("the bundled suite is not generated (coevo tasks generate)")
    return folders[0]


def coevo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coevo.cli", *args], check=False, capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})}, timeout=600)


def test_eval_on_docker_scores_the_fixture(tmp_path):
    out = tmp_path / "eval.jsonl"
    run = coevo("eval", "--model", "oracle", "--harness", HARNESS, "--tasks", str(FIXTURES), "--split", "all",
                "--backend", "docker", *IMAGE_MAP, "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["overall"]["pass_at_1"] == 1.0 and summary["overall"]["statuses"] == {"submitted": 1}
    assert f"FROM python:3.12-slim uses the local image {BASE_TAG}" in run.stderr  # the mapped-base notice


def test_eval_on_local_refuses_the_fixture_before_any_episode(tmp_path):
    run = coevo("eval", "--model", "oracle", "--harness", HARNESS, "--tasks", str(FIXTURES), "--split", "all",
                "--backend", "local", "--out", str(tmp_path / "eval.jsonl"))
    assert run.returncode == 2 and not (tmp_path / "eval.jsonl").exists()
    assert "1 task(s) need the docker backend; run with --backend docker" in run.stderr
    assert "harbor-apt-pip-user" in run.stderr and "line 3: RUN apt-get" in run.stderr


def test_tasks_check_auto_picks_docker_for_the_fixture_and_local_for_a_bundled_task():
    result = CliRunner().invoke(app, ["tasks", "check", str(FIXTURE), str(bundled_task()), "--backend", "auto",
                                      "--jobs", "2", "--json", *IMAGE_MAP])
    rows = {row["task"]: row for row in json.loads(result.stdout[result.stdout.index("["):])}
    assert result.exit_code == 0, rows
    assert rows["harbor-apt-pip-user"]["backend"] == "docker" and rows[bundled_task().name]["backend"] == "local"
    assert all(row["ok"] and row["oracle"] == 1.0 and row["nothing"] == 0.0 for row in rows.values())


def test_tasks_check_local_reports_the_refusal_as_a_row():
    result = CliRunner().invoke(app, ["tasks", "check", str(FIXTURE), "--backend", "local", "--json"])
    [row] = json.loads(result.stdout)
    assert result.exit_code == 1 and row["backend"] == "local" and row["oracle"] is None
    assert "needs the docker backend" in row["error"] and "--backend docker, or auto" in row["error"]


def test_docker_needed_without_an_engine_says_how_to_start_one(tmp_path):
    nobody = {"DOCKER_HOST": f"unix://{tmp_path / 'nobody.sock'}"}
    check = coevo("tasks", "check", str(FIXTURE), str(bundled_task()), "--backend", "auto", "--json", env=nobody)
    rows = {row["task"]: row for row in json.loads(check.stdout)}
    assert check.returncode == 1 and rows[bundled_task().name]["ok"]  # local tasks still run
    error = rows["harbor-apt-pip-user"]["error"]
    assert "task harbor-apt-pip-user: needs the docker backend" in error and "line 3: RUN apt-get" in error
    assert f"no docker engine answers at {nobody['DOCKER_HOST']}" in error and "dockerd" in error

    run = coevo("eval", "--model", "oracle", "--harness", HARNESS, "--tasks", str(FIXTURES), "--split", "all",
                "--backend", "docker", "--out", str(tmp_path / "eval.jsonl"), env=nobody)
    assert run.returncode == 2 and "--backend docker: no docker engine answers" in run.stderr
    assert "DOCKER_HOST" in run.stderr and "dockerd" in run.stderr


def test_an_unknown_backend_or_image_map_entry_names_what_is_valid():
    with pytest.raises(ValueError, match="--backend 'podman': valid: local, docker, auto"):
        backends_for([load_task(FIXTURE)], "podman")
    result = CliRunner().invoke(app, ["tasks", "check", str(FIXTURE), "--backend", "docker",
                                      "--image-map", "python:3.12-slim"])
    assert result.exit_code == 2 and "expected FROM-NAME=LOCAL-IMAGE" in result.output
