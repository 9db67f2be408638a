"""`coevo tasks check` over the whole bundled suite: every reference solution scores 1 and doing
nothing scores 0, in real sandboxes, through the CLI users run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_bundled_task_passes_its_oracle_and_fails_when_nothing_is_done():
    done = subprocess.run([sys.executable, "-m", "coevo.cli", "tasks", "check", str(ROOT / "tasks"), "--json"],
                          check=False, capture_output=True, text=True, timeout=1500)
    rows = json.loads(done.stdout)
    failed = [r for r in rows if not r["ok"]]
    listed = [t["name"] for t in json.loads((ROOT / "tasks" / "manifest.json").read_text())["tasks"]]
    assert sorted(r["task"] for r in rows) == sorted(listed) and not failed, failed[:5]  # all checked, all ok
    assert done.returncode == 0


def test_check_exits_nonzero_and_names_a_broken_task(make_task):
    broken = make_task("broken", solve_sh="echo 41 > /app/answer.txt\n")
    done = subprocess.run([sys.executable, "-m", "coevo.cli", "tasks", "check", str(broken), "--json"],
                          check=False, capture_output=True, text=True)
    (row,) = json.loads(done.stdout)
    assert done.returncode == 1 and row["oracle"] == 0.0 and "reference solution scored 0" in row["error"]
