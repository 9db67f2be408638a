"""Control processors (coevo.rollout.processors), each reached on purpose in a real sandbox episode driven by
a scripted policy: the repeat breaker, the step-budget notice, the self-check nudge and the empty-reply
retry; and each, off (the default) or on without cause to fire, leaves the episode as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coevo.harness import HarnessError, load_harness, render_action
from coevo.harness.fingerprint import fingerprint
from coevo.policy.scripted import ScriptedPolicy
from coevo.rollout import rollout

REPO = Path(__file__).resolve().parents[1]
ANSWER = "echo 42 > /app/answer.txt"


def harness(name: str = "mini_bash", **overrides):
    return load_harness(REPO / "harnesses" / f"{name}.yaml").with_overrides(overrides)


def bash(h, *commands: str, submit: bool = False) -> str:
    return render_action(h, list(commands), submit=submit)


def run(task, h, replies, tokenizer=None):
    [trajectory] = rollout([task], h, ScriptedPolicy(replies, tokenizer))
    return trajectory


def seen(t) -> list[str]:
    """What the environment said, one entry per observation turn (a tool format's results joined)."""
    out: list[str] = []
    for prev, m in zip([None, *t.messages], t.messages):
        if m["role"] == "user" or (m["role"] == "tool" and prev["role"] != "tool"):
            out.append(m["content"])
        elif m["role"] == "tool":
            out[-1] += "\n" + m["content"]
    return out


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from coevo.train.model import corpus, train_tokenizer, wrap_tokenizer

    return wrap_tokenizer(train_tokenizer(corpus(tmp_path_factory.mktemp("no-tasks"), REPO / "prompts")))


# -- the repeat breaker ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mini_bash", "qwen_tools"])
def test_repeat_breaker_hints_then_ends_and_the_work_is_still_verified(task, name):
    h = harness(name, **{"recovery.repeat_limit": 2})
    t = run(task, h, [bash(h, ANSWER), bash(h, "ls"), bash(h, "ls"), bash(h, "ls")])
    assert (t.status, t.turns, t.reward) == ("repeat_limit", 4, 1.0)  # verified, like turn_limit
    assert "`ls` asked for 3 times (recovery.repeat_limit=2)" in t.error
    hint = "You have now run `ls` 2 times"
    assert [hint in s for s in seen(t)] == [False, False, False, True]
    assert t.steps[-1].calls[0].arguments["command"] == "ls" and t.steps[-1].results == []  # not run
    assert t.processors == {"repeat_hint": 1, "repeat_limit": 1}


def test_repeats_count_per_command_over_the_episode(task):
    h = harness(**{"recovery.repeat_limit": 2})
    t = run(task, h, [bash(h, c) for c in ("ls", "pwd", "ls", "pwd")] + [bash(h, ANSWER, submit=True)])
    assert (t.status, t.reward, t.processors) == ("submitted", 1.0, {"repeat_hint": 2})
    assert "run `ls` 2 times" in seen(t)[3] and "run `pwd` 2 times" in seen(t)[4]


# -- the step-budget notice ------------------------------------------------------------------------
def test_step_budget_notice_shows_the_turns_left_after_every_observation(task):
    h = harness(**{"context.step_budget_notice": True, "limits.max_turns": 5})
    t = run(task, h, ["no block here", bash(h, ANSWER), bash(h, submit=True)])
    assert (t.status, t.reward, t.format_errors) == ("submitted", 1.0, 1)
    first, second = seen(t)[1:]
    assert first.startswith("Format error") and first.endswith("[4 of 5 turns left]")
    assert second.endswith("[3 of 5 turns left]") and "4 of 5" not in second
    assert t.processors == {"step_budget": 2}


# -- the self-check nudge --------------------------------------------------------------------------
def test_self_check_holds_a_submit_sent_with_its_commands_then_accepts_the_next(task):
    h = harness(**{"recovery.self_check": True})
    t = run(task, h, [bash(h, ANSWER, "cat /app/answer.txt", submit=True), bash(h, submit=True)])
    assert (t.status, t.reward, t.turns, t.processors) == ("submitted", 1.0, 2, {"self_check": 1})
    observation = seen(t)[1]
    assert "42" in observation and observation.endswith("and check it. Then submit.")
    assert [len(s.results) for s in t.steps] == [1, 0]  # one bash block: one call, then the submit


def test_self_check_holds_a_submit_before_any_command_once_per_episode(task):
    h = harness("qwen_tools", **{"recovery.self_check": True})
    t = run(task, h, [bash(h, submit=True), bash(h, submit=True), bash(h, ANSWER)])
    assert (t.status, t.turns, t.reward, t.processors) == ("submitted", 2, 0.0, {"self_check": 1})
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert t.messages[3]["content"].startswith("Before you submit")


def test_self_check_lets_a_submit_after_seen_output_through(task):
    h = harness(**{"recovery.self_check": True})
    t = run(task, h, [bash(h, ANSWER), bash(h, submit=True)])
    assert (t.status, t.turns, t.reward, t.processors) == ("submitted", 2, 1.0, {})


# -- the empty-reply retry -------------------------------------------------------------------------
def test_empty_reply_is_resampled_once_with_a_shorter_prompt_and_the_buffer_stays_exact(task, tokenizer):
    h = harness(**{"recovery.empty_reply_retry": True})
    script = [bash(h, "echo one"), bash(h, "echo two"), "  \n", bash(h, ANSWER), bash(h, submit=True)]
    requests = []

    def replies(request, turn):
        requests.append(request)
        return script[turn]

    t = run(task, h, replies, tokenizer)
    assert (t.status, t.reward, t.turns, t.format_errors, t.drift) == ("submitted", 1.0, 5, 0, 0)
    assert t.processors == {"empty_reply_retry": 1} and "turn 3: empty reply" in t.errors[0]
    sizes = [len(r.token_ids) for r in requests]
    assert sizes[3] < sizes[2] < sizes[4]  # the retry elides all but the last observation; then full again
    retry = [m["content"] for m in requests[3].messages]
    assert retry[3] == h.context.elided_text and "two" in retry[5] and len(retry) == 6
    assert [m["content"] for m in t.messages if m["role"] == "assistant"] == [script[i] for i in (0, 1, 3, 4)]
    # Append-only: every full prompt is a prefix of the final buffer, which never held the empty reply.
    final = t.prompt_ids + t.completion_ids
    assert all(final[: len(r.token_ids)] == r.token_ids for i, r in enumerate(requests) if i != 3)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    sampled = [i for s in (0, 1, 3, 4) for i in tokenizer.encode(script[s], add_special_tokens=False) + [eos]]
    assert t.model_tokens == sampled and len(t.steps) == 5 and t.steps[2].reply == "  \n"


def test_an_empty_retry_is_a_format_error(task):
    h = harness(**{"recovery.empty_reply_retry": True, "recovery.max_format_retries": 0})
    t = run(task, h, ["", ""])
    assert (t.status, t.turns, t.format_errors) == ("format_errors", 2, 1)
    assert t.processors == {"empty_reply_retry": 1}


# -- off by default --------------------------------------------------------------------------------
def test_off_by_default(task):
    h = harness()
    assert (h.recovery.repeat_limit, h.recovery.self_check, h.recovery.empty_reply_retry,
            h.context.step_budget_notice) == (None, False, False, False)
    t = run(task, h, [bash(h, "ls")] * 4 + [bash(h, ANSWER, submit=True)])
    assert (t.status, t.turns, t.reward, t.processors) == ("submitted", 5, 1.0, {})  # no hint, end or nudge
    assert not any("turns left" in s or "You have now run" in s for s in seen(t))
    empty = run(task, h, ["", bash(h, ANSWER, submit=True)])
    assert (empty.format_errors, empty.processors) == (1, {}) and seen(empty)[1].startswith("Format error")


@pytest.mark.parametrize("overrides", [{"recovery.repeat_limit": 3}, {"recovery.self_check": True},
                                       {"recovery.empty_reply_retry": True}])
def test_on_without_cause_to_fire_the_episode_is_identical(task, tokenizer, overrides):
    def episode(h):
        return run(task, h, [bash(h, "ls"), bash(h, "ls"), bash(h, ANSWER), bash(h, submit=True)], tokenizer)

    off, on = episode(harness()), episode(harness(**overrides))
    assert (on.status, on.processors, on.drift) == ("submitted", {}, 0)
    assert (on.messages, on.prompt_ids, on.completion_ids, on.completion_mask) == \
        (off.messages, off.prompt_ids, off.completion_ids, off.completion_mask)


# -- templates and the fingerprint -----------------------------------------------------------------
@pytest.mark.parametrize(("slot", "on"), [("repeat_hint", "recovery: {repeat_limit: 3}"),
                                          ("step_budget", "context: {step_budget_notice: true}"),
                                          ("self_check", "recovery: {self_check: true}")])
def test_a_broken_processor_template_fails_at_load_time_naming_file_and_line(tmp_path, slot, on):
    shutil.copytree(REPO / "prompts", tmp_path / "prompts")
    (tmp_path / "harnesses").mkdir()
    (tmp_path / "harnesses" / "h.yaml").write_text(on)
    load_harness(tmp_path / "harnesses" / "h.yaml")  # fine as shipped
    (tmp_path / "prompts" / f"{slot}.j2").write_text("Fine.\n{{ no_such_variable }}\n")
    with pytest.raises(HarnessError, match=rf"{slot}\.j2:2: 'no_such_variable' is undefined"):
        load_harness(tmp_path / "harnesses" / "h.yaml")


@pytest.mark.parametrize("overrides", [{"recovery.repeat_limit": 3}, {"context.step_budget_notice": True},
                                       {"recovery.self_check": True}, {"recovery.empty_reply_retry": True}])
def test_each_processor_on_changes_the_fingerprint(overrides):
    assert fingerprint(harness(**overrides)) != fingerprint(harness())
    limits = [fingerprint(harness(**{"recovery.repeat_limit": n})) for n in (3, 4)]
    assert limits[0] != limits[1]
