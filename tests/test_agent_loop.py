"""The agent loop, end to end: a scripted policy drives real sandboxes and real verifiers. Each recovery
path and each end status is reached on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.harness import load_harness, render_action
from coevo.policy.scripted import ScriptedPolicy
from coevo.rollout import rollout
from coevo.tasks import load_task

REPO = Path(__file__).resolve().parents[1]
ANSWER = "echo 42 > /app/answer.txt"


def harness(name: str = "mini_bash", **overrides):
    return load_harness(REPO / "harnesses" / f"{name}.yaml").with_overrides(overrides)


def bash(h, *commands: str, submit: bool = False) -> str:
    return render_action(h, list(commands), submit=submit)


def run(task, h, replies):
    [trajectory] = rollout([task], h, ScriptedPolicy(replies))
    return trajectory


def user_texts(t) -> list[str]:
    return [m["content"] for m in t.messages if m["role"] in ("user", "tool")]


# -- end statuses ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["terminus_json", "qwen_tools", "mini_bash"])
def test_submitted_and_verified(task, name):
    h = harness(name)
    t = run(task, h, [bash(h, ANSWER), bash(h, submit=True)])
    assert (t.status, t.reward, t.turns, t.error) == ("submitted", 1.0, 2, None)
    assert t.steps[0].calls[0].arguments["command"] == ANSWER and t.steps[0].results[0].exit_code == 0


def test_turn_limit_still_verifies_the_work(task):
    h = harness(**{"limits.max_turns": 3})
    t = run(task, h, [bash(h, ANSWER), bash(h, "ls")])
    assert (t.status, t.turns, t.reward) == ("turn_limit", 3, 1.0)
    assert "limits.max_turns" in t.error


def test_token_limit(task):
    h = harness(**{"limits.max_episode_tokens": 60})
    reply = bash(h, "echo " + "x" * 180)  # ~50 tokens at 4 characters each (a text-only policy)
    t = run(task, h, [reply])
    assert (t.status, t.turns) == ("token_limit", 2) and "max_episode_tokens=60" in t.error


def test_context_exceeded(task):
    h = harness(**{"limits.max_context_tokens": 300, "limits.max_tokens_per_turn": 64})
    t = run(task, h, [bash(h, "seq 1 400")])
    assert (t.status, t.turns) == ("context_exceeded", 1) and "max_context_tokens=300" in t.error


def test_wall_time_timeout(task):
    h = harness(**{"limits.wall_time_s": 0.5})
    t = run(task, h, [bash(h, "sleep 0.7")])
    assert (t.status, t.turns) == ("timeout", 1) and "wall_time_s" in t.error


def test_format_errors_end_after_the_retry_cap(task):
    h = harness(**{"recovery.max_format_retries": 2})
    t = run(task, h, ["I think I should list the files."])
    assert (t.status, t.turns, t.format_errors) == ("format_errors", 3, 3)
    feedback = [u for u in user_texts(t) if u.startswith("Format error")]
    assert len(feedback) == 2 and "Found 0 ```bash blocks" in feedback[0] and "```bash\nls -la\n```" in feedback[0]
    assert [s.format_error is not None for s in t.steps] == [True] * 3


def test_format_error_feedback_lets_the_model_recover(task):
    h = harness("terminus_json")
    t = run(task, h, ["ls", bash(h, ANSWER, submit=True)])
    assert (t.status, t.reward, t.format_errors) == ("submitted", 1.0, 1)
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert t.messages[3]["content"].startswith("Format error: No JSON object found")


def test_without_feedback_a_bad_reply_is_dropped_and_resampled(task):
    h = harness(**{"recovery.format_error_feedback": False})
    t = run(task, h, ["oops", bash(h, ANSWER, submit=True)])
    assert (t.status, t.reward, t.turns, t.format_errors) == ("submitted", 1.0, 2, 1)
    assert "oops" not in [m["content"] for m in t.messages] and t.steps[0].reply == "oops"


def test_error_limit_counts_consecutive_failing_turns(task):
    h = harness(**{"recovery.max_consecutive_errors": 2})
    t = run(task, h, [bash(h, "false"), bash(h, "true"), bash(h, "false"), "no block", bash(h, "true")])
    assert (t.status, t.turns) == ("error_limit", 4)  # the clean turn 2 reset the streak
    assert "recovery.max_consecutive_errors" in t.error


def test_sandbox_error_is_recorded_and_scores_zero(make_task):
    task = load_task(make_task("needs-docker", dockerfile="FROM debian:bookworm-slim\nRUN apt-get update\n"))
    h = harness()
    t = run(task, h, [bash(h, ANSWER, submit=True)])
    assert (t.status, t.reward, t.turns) == ("sandbox_error", 0.0, 0)
    assert "NeedsDockerError" in t.error and "docker backend" in t.error


def test_policy_error_scores_zero_without_verifying(task):
    h = harness()

    def replies(request, turn):
        if turn == 1:
            raise RuntimeError("endpoint went away")
        return bash(h, ANSWER)

    t = run(task, h, replies)
    assert (t.status, t.turns, t.reward, t.verify_error) == ("policy_error", 1, 0.0, None)
    assert t.error == "RuntimeError: endpoint went away"


def test_verifier_failure_is_data(make_task):
    task = load_task(make_task("silent-tests", test_sh="true\n"))
    h = harness()
    t = run(task, h, [bash(h, ANSWER, submit=True)])
    assert (t.status, t.reward) == ("submitted", 0.0) and t.verify_error.startswith("VerifierError")


# -- recovery hints and observations ---------------------------------------------------------------
def test_timeout_notice_or_not(task):
    replies = lambda h: [bash(h, "sleep 5"), bash(h, submit=True)]
    h = harness(**{"limits.command_timeout_s": 0.5})
    t = run(task, h, replies(h))
    assert t.timeouts == 1 and t.steps[0].results[0].timed_out and "was killed" in user_texts(t)[1]
    quiet = harness(**{"limits.command_timeout_s": 0.5, "recovery.timeout_notice": False})
    assert "Use a faster command" not in user_texts(run(task, quiet, replies(quiet)))[1]


def test_nonzero_exit_hint(task):
    h = harness("qwen_tools")
    t = run(task, h, [bash(h, "ls /nowhere"), bash(h, submit=True)])
    assert "No such file" in user_texts(t)[1] and "The command failed (exit code 2)" in user_texts(t)[1]
    plain = harness("qwen_tools", **{"recovery.nonzero_exit_hint": False})
    assert "The command failed" not in user_texts(run(task, plain, [bash(plain, "ls /nowhere"), bash(plain, submit=True)]))[1]


def test_initial_observation_in_first_message(task):
    t = run(task, harness("terminus_json"), ['{"commands": [], "task_complete": true}'])
    assert "input.txt" in user_texts(t)[0] and t.messages[1]["content"].startswith("Task: Write 42")


def test_file_tools(task):
    h = harness("qwen_tools")
    call = '<tool_call>{{"name": "{}", "arguments": {}}}</tool_call>'.format
    t = run(task, h, [call("write_file", '{"path": "/app/answer.txt", "content": "42"}')
                      + call("read_file", '{"path": "/app/answer.txt"}') + call("read_file", '{"path": "/app/nope"}'),
                      call("submit", "{}")])
    assert (t.status, t.reward) == ("submitted", 1.0)
    tools = [m["content"] for m in t.messages if m["role"] == "tool"]
    assert tools[0].startswith("wrote 2 characters") and tools[1].startswith("42") and "nope" in tools[2]
    assert t.steps[0].results[2].exit_code == 1


def test_long_output_is_cut_head_and_tail(task):
    h = harness(**{"context.output_head_chars": 100, "context.output_tail_chars": 50})
    t = run(task, h, [bash(h, "seq 1 2000"), bash(h, submit=True)])
    seen = user_texts(t)[1]
    assert seen.count("characters omitted") == 1 and "\n1\n2\n3\n" in seen and "1999\n2000" in seen


def test_last_k_history_elides_older_observations(task):
    h = harness(**{"context.history": "last_k", "context.k": 1})
    seen: list[list[str]] = []

    def replies(request, turn):
        seen.append([m["content"] for m in request.messages if m["role"] == "user"])
        return bash(h, f"echo step{turn}") if turn < 3 else bash(h, submit=True)

    t = run(task, h, replies)
    assert t.status == "submitted"
    assert seen[3][1:] == [h.context.elided_text, h.context.elided_text, seen[3][3]] and "step2" in seen[3][3]
    assert all(f"step{i}" in user_texts(t)[i + 1] for i in range(3))  # the record keeps the full history
