"""`coevo check CONFIG` / `coevo search CONFIG --dry-run`: real config, suite, sandbox and stores."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from coevo.cli import app
from tests.search_helpers import write_config

ENV = {"COLUMNS": "400"}


def test_check_passes_on_a_good_config(tmp_path, suite):
    config = write_config(tmp_path, suite)
    result = CliRunner().invoke(app, ["check", str(config)], env=ENV)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    assert [r.split("│")[1].strip() for r in rows if r.split("│")[1].strip()] == [
        "config", "space", "tasks", "model", "sandbox", "stores", "estimate"]
    assert all(r.split("│")[2].strip() in ("PASS", "") for r in rows)
    assert "from an oracle" in result.output or "oracle episode" in result.output
    assert not (tmp_path / "runs").exists()  # nothing the real search would take for its own


def test_check_reports_every_problem(tmp_path, suite):
    tasks = tmp_path / "tasks"
    shutil.copytree(suite, tasks)
    broken = min(p for p in tasks.iterdir() if (p / "task.toml").is_file())
    (broken / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n")
    config = write_config(tmp_path, tasks)
    space = tmp_path / "space.yaml"
    space.write_text(space.read_text() + "decoding.nonexistent: {type: float, low: 0.1, high: 1.0}\n")
    result = CliRunner().invoke(app, ["search", str(config), "--dry-run"], env=ENV)
    assert result.exit_code == 1, result.output
    out = " ".join(result.output.split())
    assert f"FAIL space: 1 problem(s) in search space: {space}: 'decoding.nonexistent'" in out
    assert "nonexistent' is not a field of decoding" in out
    assert f"FAIL tasks: task {broken.name}: {broken / 'task.toml'}: [agent] timeout_sec" in out
    for ok in ("config", "model", "sandbox", "stores", "estimate"):  # the other checks still ran, and passed
        assert f"FAIL {ok}" not in out and f"│ {ok} │ PASS │" in out
