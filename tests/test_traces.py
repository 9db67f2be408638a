"""Episodes as MLflow traces (coevo/search/traces.py): real episodes in real sandboxes, written to a real
sqlite MLflow store, read back through MLflow's own client."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from search_helpers import ROOT

from coevo.rollout.trajectory import Step, Trajectory


def _store(tmp_path):
    from coevo.search.tracking import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    return uri, Tracker(uri, "traces", tmp_path / "mlartifacts")


def _traces(uri: str, experiment_id: str, run_id: str | None = None, where: str | None = None):
    from mlflow import MlflowClient

    return MlflowClient(uri).search_traces(locations=[experiment_id], run_id=run_id, filter_string=where,
                                           max_results=1000)


def test_an_episode_is_a_trace_of_its_run_with_turns_tool_calls_and_the_verifier(task, tmp_path):
    from coevo.harness import load_harness, render_action
    from coevo.policy.scripted import ScriptedPolicy
    from coevo.rollout import rollout

    harness = load_harness(ROOT / "harnesses" / "mini_bash.yaml")
    replies = [render_action(harness, ["cat /app/missing.txt"], submit=False),
               render_action(harness, ["echo 41 > /app/answer.txt"], submit=True)]
    [episode] = rollout([task], harness, ScriptedPolicy(replies))
    uri, tracker = _store(tmp_path)
    run_id = tracker.start("h1 #0")
    assert tracker.episodes(run_id, [episode], 4, tags={"phase": "h1", "checkpoint": "g0"}) == 1

    [trace] = _traces(uri, tracker.experiment_id, run_id)
    info, spans = trace.info, trace.data.spans
    assert info.trace_metadata["mlflow.sourceRun"] == run_id and info.state.value == "ERROR"
    assert {k: info.tags[k] for k in ("status", "outcome", "task", "phase", "checkpoint")} == {
        "status": "submitted", "outcome": "failed", "task": task.name, "phase": "h1", "checkpoint": "g0"}
    names = [s.name for s in spans]
    assert names == [f"episode {task.name} #0", "sandbox start", "turn 1", "tool bash", "turn 2", "tool bash",
                     "verifier"]
    root, *children = spans
    assert root.attributes["harness_fingerprint"] == episode.harness_fingerprint and root.attributes["reward"] == 0
    assert all(root.start_time_ns <= s.start_time_ns <= s.end_time_ns <= root.end_time_ns for s in children)
    turn1, failed_call = spans[2], spans[3]
    assert turn1.inputs["messages"][0]["role"] == "system" and "missing.txt" in turn1.outputs["reply"]
    assert failed_call.outputs["exit_code"] == 1 and "No such file" in failed_call.outputs["output"]
    assert failed_call.status.status_code.value == "ERROR" and spans[5].status.status_code.value == "OK"
    assert spans[-1].outputs["reward"] == 0 and spans[-1].outputs["passed"] is False
    # what the UI's trace filter does: by tag
    assert len(_traces(uri, tracker.experiment_id, where="tags.status = 'submitted'")) == 1
    assert _traces(uri, tracker.experiment_id, where="tags.outcome = 'passed'") == []


def _episode(task: str, reward: float, status: str = "submitted", text: str = "") -> Trajectory:
    return Trajectory(task=task, harness="h", status=status, reward=reward, turns=1,
                      messages=[{"role": "system", "content": "s"}, {"role": "user", "content": text or task},
                                {"role": "assistant", "content": "ok"}],
                      steps=[Step(reply=text or "ok")], timing={"start": 0.1, "generate": 0.1, "total": 0.3})


def test_sampling_takes_failures_first_and_the_final_table_takes_every_failure():
    from coevo.search.traces import pick

    episodes = [_episode(f"t{i}", 1.0 if i % 3 == 0 else 0.0) for i in range(12)]  # 4 passed, 8 failed
    picked = [e[0] for e in pick(episodes, 4, seed=1)]
    assert len(picked) == 4 and sum(t.reward == 0 for t in picked) == 2
    assert [e[0].task for e in pick(episodes, 4, seed=1)] == [e[0].task for e in pick(episodes, 4, seed=1)]
    assert sum(e[0].reward == 0 for e in pick(episodes[1:3], 4)) == 2  # fewer than n: all of them
    table = [e[0] for e in pick(episodes, 2, every_failure=True)]
    assert sum(t.reward == 0 for t in table) == 8 and sum(t.reward == 1 for t in table) == 2
    assert pick(episodes, 0) == []


def test_a_secret_in_an_episode_never_reaches_the_trace_store(tmp_path, monkeypatch):
    """Defence in depth (the canary test shows no key reaches an episode): a secret from this process's
    environment, or a URL password, in an episode's text is masked before it is written."""
    key = "sk-canary-" + "7f3a9c2e" * 3
    monkeypatch.setenv("COEVO_TEST_API_KEY", key)
    uri, tracker = _store(tmp_path)
    run_id = tracker.start("eval")
    leak = f"export OPENAI_API_KEY={key}; psql postgresql://coevo:hunter2secret@db/optuna"
    tracker.episodes(run_id, [_episode("leaky", 0.0, text=leak)], 4)
    [trace] = _traces(uri, tracker.experiment_id, run_id)
    assert "OPENAI_API_KEY=***" in trace.data.spans[2].outputs["reply"]
    assert "coevo:***@db" in trace.data.spans[2].outputs["reply"]
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert key.encode() not in stored and b"hunter2secret" not in stored


def test_coevo_eval_logs_a_run_with_every_failure_as_a_trace(make_task, tmp_path):
    for name in ("good-a", "good-b", "good-c"):
        make_task(name)
    make_task("broken", solve_sh="echo 41 > /app/answer.txt\n")  # the oracle fails this one
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = subprocess.run([sys.executable, "-m", "coevo.cli", "eval", "--harness",
                             str(ROOT / "harnesses" / "terminus_json.yaml"), "--model", "oracle", "--tasks",
                             str(tmp_path / "tasks"), "--split", "all", "--out", str(tmp_path / "t.jsonl"),
                             "--tracking-uri", uri, "--traces", "2", "--json"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["overall"]["pass_at_1"] == 0.75
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("coevo-eval")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    [run] = client.search_runs([experiment.experiment_id])
    assert run.data.metrics["pass_at_1"] == 0.75 and run.data.metrics["traces"] == 3  # the failure + 2
    [failed] = _traces(uri, experiment.experiment_id, run.info.run_id, "tags.outcome = 'failed'")
    assert failed.info.tags["task"] == "broken" and failed.info.tags["role"] == "eval"


def test_each_turn_shows_what_the_model_read_even_when_a_reply_left_the_chat():
    from coevo.search.traces import _turn_inputs

    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "good reply"}, {"role": "user", "content": "output"}]
    steps = [Step(reply="unparseable"), Step(reply="good reply"), Step(reply="last")]  # the first was dropped
    assert [[m["content"] for m in turn] for turn in _turn_inputs(chat, steps)] == [
        ["s", "task"], ["s", "task"], ["output"]]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (root)")
def test_an_artifact_on_a_full_disk_names_the_run_and_where_it_was_going(tmp_path):
    from coevo.search.tracking import Tracker

    store = tmp_path / "artifacts"
    store.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(store)], check=True)
    try:
        tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "full-disk", store)
        run_id = tracker.start("trial")
        with pytest.raises(OSError, match=rf"MLflow artifact big.txt of run {run_id} could not be written to "
                                          rf"file://{store}.*No space left on device"):
            tracker.text(run_id, "x" * 1_000_000, "big.txt")
    finally:
        subprocess.run(["umount", "-l", str(store)], check=False)
