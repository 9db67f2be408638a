"""`coevo eval` and its statistics: real sandboxes, the oracle and a do-nothing scripted policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from coevo.evaluate import evaluate
from coevo.evaluate.stats import bootstrap_ci, paired_bootstrap, per_task_means
from coevo.harness import load_harness
from coevo.policy.scripted import OraclePolicy, ScriptedPolicy
from coevo.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent


def test_bootstrap_interval_brackets_the_mean_and_narrows_with_more_tasks():
    few, many = [1.0, 0.0] * 5, [1.0, 0.0] * 100
    low, high = bootstrap_ci(few)
    assert low < 0.5 < high
    low2, high2 = bootstrap_ci(many)
    assert high2 - low2 < high - low
    assert bootstrap_ci([1.0] * 7) == (1.0, 1.0)


def test_per_task_means_cluster_samples_and_paired_bootstrap_sees_a_real_gain():
    assert per_task_means([("a", 1.0), ("a", 0.0), ("b", 1.0)]) == {"a": 0.5, "b": 1.0}
    base = {f"t{i}": 0.0 for i in range(40)}
    better = {f"t{i}": 1.0 if i % 2 else 0.0 for i in range(40)}
    gain, low, high = paired_bootstrap(base, better)
    assert gain == 0.5 and low > 0
    gain, low, high = paired_bootstrap(base, base)
    assert gain == 0 and low <= 0 <= high


@pytest.fixture
def two_tasks(make_task):
    return [load_task(make_task("first")), load_task(make_task("second"))]


def test_oracle_scores_one_and_nothing_scores_zero(two_tasks, tmp_path):
    harness = load_harness(ROOT / "harnesses" / "mini_bash.yaml")
    report = evaluate(two_tasks, harness, OraclePolicy(harness, two_tasks), samples=2, seed=0,
                      out=tmp_path / "oracle.jsonl")
    assert report.overall.pass_at_1 == 1.0 and report.overall.episodes == 4
    assert len((tmp_path / "oracle.jsonl").read_text().splitlines()) == 4
    quit_now = ScriptedPolicy(["```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"])
    report = evaluate(two_tasks, harness, quit_now, samples=1, seed=0)
    assert report.overall.pass_at_1 == 0.0 and report.overall.statuses == {"submitted": 2}


def test_eval_cli_json_is_reproducible(tmp_path):
    tasks = ROOT / "tasks"
    if not (tasks / "manifest.json").exists():
        pytest.skip("the bundled suite is not generated")
    cmd = [sys.executable, "-m", "coevo.cli", "eval", "--model", "oracle", "--harness",
           str(ROOT / "harnesses" / "terminus_json.yaml"), "--tasks", str(tasks), "--split", "dev", "--json"]
    runs = [json.loads(subprocess.run(cmd + ["--out", str(tmp_path / f"{i}.jsonl")], capture_output=True,
                                      text=True, check=True).stdout) for i in range(2)]
    assert runs[0]["overall"]["pass_at_1"] == 1.0
    assert runs[0]["per_task"] == runs[1]["per_task"] and runs[0]["families"].keys() == runs[1]["families"].keys()
