"""mini-swe-agent, unmodified, on bundled tasks: its shell in coevo sandboxes, its model behind `coevo serve`
sessions, its episodes scored by the tasks' verifiers and recorded as coevo Trajectories. First a scripted
policy (the flow and the rewards are asserted), then the tiny model (scores recorded, not asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_helpers import MODEL, serving, tiny_model, torch_threads

from coevo.native.run import run_native
from coevo.native.spec import load_native_harness
from coevo.policy.scripted import solution_commands
from coevo.rollout.trajectory import episodes
from coevo.tasks import load_taskset

REPO = Path(__file__).resolve().parents[1]
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@pytest.fixture(scope="module")
def model_dir():
    return tiny_model()


@pytest.fixture(scope="module")
def tasks():
    dev = load_taskset(REPO / "tasks").split("dev")
    families = {}
    for task in dev:
        families.setdefault(task.family, task)
    return list(families.values())[:3]


@pytest.fixture(scope="module")
def harness():
    return load_native_harness(REPO / "harnesses" / "native" / "mini_swe_agent.yaml")


def block(command: str) -> str:
    return f"THOUGHT: one step.\n\n```mswea_bash_command\n{command}\n```"


def scripted_agent_replies(tasks):
    """Solve the first two tasks with their solution/solve.sh and do nothing useful on the third; the task
    is recognised by its instruction in the agent's first user message."""
    def reply(request, turn: int) -> str:
        task = next(t for t in tasks if t.instruction.strip() in request.messages[1]["content"])
        if turn > 0:
            return block(SUBMIT)
        wrong = task is tasks[2]
        return block("echo not-the-answer" if wrong else "\n".join(solution_commands(task.solution)))
    return reply


def test_mini_swe_agent_runs_unmodified_and_is_recorded(model_dir, tasks, harness):
    from transformers import AutoTokenizer

    from coevo.policy.scripted import ScriptedPolicy

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    with serving(ScriptedPolicy(scripted_agent_replies(tasks), tokenizer), tokenizer) as (server, app):
        trajectories = run_native(tasks, harness, server.url, MODEL)
        assert app.state.served.sessions.ids() == [], "every session was collected"
    assert [t.task for t in trajectories] == [t.name for t in tasks]
    assert [t.reward for t in trajectories] == [1.0, 1.0, 0.0]
    for t in trajectories:
        assert (t.status, t.turns, t.drift, t.harness) == ("submitted", 2, 0, "mini_swe_agent")
        assert t.model_tokens and 0 in t.completion_mask and len(t.logprobs) == len(t.completion_ids)
        reply = tokenizer.decode(t.model_tokens)
        assert reply.endswith(block(SUBMIT) + "<|im_end|>")
        env = tokenizer.decode([i for i, m in zip(t.completion_ids, t.completion_mask) if not m])
        assert "<returncode>0</returncode>" in env, "the command's observation did not reach the model"


def test_mini_swe_agent_runs_in_docker_sandboxes(model_dir, tasks, harness):
    """The same scripted episodes with the agent's commands in docker containers (the base image stands in
    for the tasks' FROM: nothing can be pulled here)."""
    from functools import partial

    from transformers import AutoTokenizer

    from coevo.policy.scripted import ScriptedPolicy
    from coevo.sandbox import make_sandbox
    from coevo.sandbox.images import BASE_TAG

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    docker = partial(make_sandbox, backend="docker", image_map={"debian:bookworm-slim": BASE_TAG})
    with serving(ScriptedPolicy(scripted_agent_replies(tasks), tokenizer), tokenizer) as (server, _):
        trajectories = run_native(tasks, harness, server.url, MODEL, make_sandbox=docker)
    assert [(t.task, t.reward, t.status) for t in trajectories] == [
        (t.name, reward, "submitted") for t, reward in zip(tasks, (1.0, 1.0, 0.0))]


def test_the_tiny_model_drives_mini_swe_agent(model_dir, tasks, harness):
    from coevo.policy.hf import HFPolicy

    small = harness.with_overrides({"agent_settings.step_limit": 2, "decoding.max_tokens": 16})
    policy = HFPolicy(model_dir, device="cpu")
    with torch_threads(1), serving(policy, policy.tokenizer) as (server, _):
        trajectories = run_native(tasks, small, server.url, MODEL)
    # mini-swe-agent drops a reply it cannot parse from its history, so each format error (the untrained
    # model makes nothing else) starts a new segment: several per episode, one record per episode.
    assert [t.task for t in episodes(trajectories)] == [t.name for t in tasks]
    for t in trajectories:
        assert t.status in ("submitted", "turn_limit", "format_errors"), (t.status, t.error)
        assert 0 < len(t.model_tokens) <= 2 * 16 and t.turns <= 2
    print("tiny model x mini-swe-agent:", [(t.task, t.status, t.reward) for t in trajectories])


def test_a_native_harness_is_searchable_and_exports_the_agents_own_config(harness, tmp_path):
    """Dotted overrides reach the agent's config; a bad one names the valid fields; the saved pair of files
    loads back to the same harness."""
    from coevo.errors import ConfigError
    from coevo.native.spec import save_native_harness

    varied = harness.with_overrides({"agent_settings.step_limit": 3, "model_settings.action_regex": r"```sh\n(.*?)\n```"})
    assert (varied.agent_settings["step_limit"], harness.agent_settings["step_limit"]) == (3, 8)
    assert "Please solve this issue" in varied.agent_settings["instance_template"], "the file's sections were merged"
    with pytest.raises(ConfigError, match="unknown field 'agent_setings'.*agent_settings"):
        harness.with_overrides({"agent_setings.step_limit": 3})
    saved = load_native_harness(save_native_harness(varied, tmp_path / "bundle"))
    assert saved.agent_file() == varied.agent_file() and saved.decoding == varied.decoding
    assert (tmp_path / "bundle" / "mini_swe_agent.agent.yaml").is_file()


def test_coevo_eval_runs_a_native_harness(model_dir, tmp_path):
    """`coevo eval --harness <kind: native>` serves the checkpoint in-process and summarises per episode."""
    import json

    from conftest import write_task
    from typer.testing import CliRunner

    from coevo.cli import app

    for name in ("one", "two"):
        write_task(tmp_path / "tasks", name)
    (tmp_path / "tasks" / "manifest.json").write_text(json.dumps(
        {"tasks": [{"name": n, "family": "demo", "split": "dev"} for n in ("one", "two")]}))
    harness = tmp_path / "tiny_mini.yaml"
    harness.write_text("kind: native\nagent: mini-swe-agent\nconfig_file: package:mini_textbased.yaml\n"
                       "agent_settings: {step_limit: 1, cost_limit: 0}\ndecoding: {max_tokens: 8}\n")
    out = tmp_path / "native.jsonl"
    with torch_threads(1):
        result = CliRunner().invoke(app, ["eval", "--model", str(model_dir), "--harness", str(harness), "--tasks",
                                          str(tmp_path / "tasks"), "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert (summary["overall"]["episodes"], summary["overall"]["tasks"]) == (2, 2)
    assert summary["overall"]["statuses"] == {"turn_limit": 2}, "the untrained model cannot submit in one step"
    segments = [json.loads(line) for line in out.read_text().splitlines()]
    assert {s["task"] for s in segments} == {"one", "two"} and all(s["completion_ids"] for s in segments)


def test_the_oracle_writes_the_agents_format_or_says_why_it_cannot(harness):
    """mini-swe-agent's own fence first; another fence when the action_regex reads only that; a regex that
    reads no fenced block is an error naming it."""
    import re

    from coevo.harness import render_action

    act = render_action(harness, ["echo 1 > /app/a"], submit=False)
    assert re.findall(harness.model_settings.get("action_regex", r"```mswea_bash_command\s*\n(.*?)\n```"), act,
                      re.DOTALL) == ["echo 1 > /app/a"]
    assert render_action(harness, [], submit=True).endswith(f"```mswea_bash_command\n{SUBMIT}\n```")
    bash_only = harness.with_overrides({"model_settings.action_regex": r"```bash\n(.*?)\n```"})
    assert "```bash\necho 1 > /app/a\n```" in render_action(bash_only, ["echo 1 > /app/a"], submit=False)
    with pytest.raises(ValueError, match=r"action_regex '<act>\(\.\*\?\)</act>' reads none of the fenced blocks"):
        render_action(harness.with_overrides({"model_settings.action_regex": "<act>(.*?)</act>"}), ["ls"], submit=False)
