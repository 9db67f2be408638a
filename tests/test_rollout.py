"""The rollout engine and its token-in/token-out trajectories: lockstep batching, exact sampled ids,
the env mask, suffix-only observations, drift, JSONL files and `coevo show`. Real sandboxes, a real
trained tokenizer, and the real tiny model where sampled tokens matter."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from coevo import Completion, GenerationRequest, SamplingParams
from coevo.harness import load_harness, render_action
from coevo.policy.scripted import ScriptedPolicy
from coevo.rollout import load_trajectories, rollout, save_trajectories
from coevo.tasks import load_task

REPO = Path(__file__).resolve().parents[1]
ANSWER = "echo 42 > /app/answer.txt"


def harness(name: str = "mini_bash", **overrides):
    return load_harness(REPO / "harnesses" / f"{name}.yaml").with_overrides(overrides)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from coevo.train.model import corpus, train_tokenizer, wrap_tokenizer

    return wrap_tokenizer(train_tokenizer(corpus(tmp_path_factory.mktemp("no-tasks"), REPO / "prompts")))


class TokenPolicy:
    """A scripted policy in tokens: `replies(task, turn) -> text`, encoded by `encode` (the tokenizer by
    default), cut at max_tokens like a model; distinct logprobs per token; records every completion."""

    def __init__(self, tokenizer, replies, encode=None, stop="<|im_end|>"):
        self.tokenizer, self.replies, self.stop = tokenizer, replies, stop
        self.encode = encode or (lambda text: tokenizer.encode(text, add_special_tokens=False))
        self.batches: list[int] = []
        self.sampled: dict[str, list[Completion]] = defaultdict(list)

    def generate(self, requests: list[GenerationRequest], params: SamplingParams) -> list[Completion]:
        self.batches.append(len(requests))
        out = []
        for r in requests:
            text = self.replies(r.meta["task"], r.meta["turn"])
            ids = self.encode(text) + [self.tokenizer.convert_tokens_to_ids(self.stop)]
            finish = "stop"
            if len(ids) > params.max_tokens:
                ids, finish = ids[: params.max_tokens], "length"
                text = self.tokenizer.decode(ids)
            c = Completion(text, ids, [-(i + 1) / 1000 for i in range(len(ids))], finish)
            self.sampled[r.meta["task"]].append(c)
            out.append(c)
        return out


def two_step(h):
    return lambda task, turn: render_action(h, [ANSWER], submit=False) if turn == 0 else render_action(h, [], True)


def by_mask(t, value: int) -> list[int]:
    return [i for i, m in zip(t.completion_ids, t.completion_mask) if m == value]


# -- lockstep --------------------------------------------------------------------------------------
def test_one_batched_generate_per_turn_and_results_in_task_order(make_task, tokenizer):
    quick, slow = load_task(make_task("quick")), load_task(make_task("slow"))
    h = harness()
    ends = {"quick": 1, "slow": 3}
    policy = TokenPolicy(tokenizer, lambda task, turn: render_action(h, ["true"], submit=turn == ends[task]))
    done = []
    trajectories = rollout([quick, slow], h, policy, n_per_task=3, on_done=done.append)
    assert policy.batches == [6, 6, 3, 3]
    assert [(t.task, t.sample) for t in trajectories] == [(n, i) for n in ("quick", "slow") for i in range(3)]
    assert [t.turns for t in trajectories] == [2] * 3 + [4] * 3
    assert all(t.status == "submitted" for t in trajectories) and len(done) == 6


def test_more_episodes_than_max_active_run_in_waves_with_bounded_open_sandboxes(make_task, tokenizer):
    """All sandboxes share one uid's process limit, so the engine never holds more than max_active open."""
    import threading

    from coevo.sandbox import make_sandbox

    tasks = [load_task(make_task(f"t{i}")) for i in range(5)]
    h = harness()
    policy = TokenPolicy(tokenizer, two_step(h))
    open_now, most, lock = [0], [0], threading.Lock()

    class Counted:
        def __init__(self, task):
            self.inner, self.opened = make_sandbox(task), False

        def start(self):  # the verifier starts a second session in the same sandbox: not a new one
            with lock:
                open_now[0] += not self.opened
                most[0] = max(most[0], open_now[0])
                self.opened = True
            return self.inner.start()

        def close(self):
            with lock:
                inner, self.inner = self.inner, None
                open_now[0] -= inner is not None
            if inner is not None:
                inner.close()

        def __getattr__(self, name):
            return getattr(self.inner, name)

    trajectories = rollout(tasks, h, policy, make_sandbox=Counted, max_active=2)
    assert [t.status for t in trajectories] == ["submitted"] * 5 and [t.reward for t in trajectories] == [1.0] * 5
    assert most[0] == 2 and open_now[0] == 0
    assert policy.batches == [2, 2, 2, 2, 1, 1]


def test_policy_returning_too_few_completions_is_a_policy_error(make_task):
    class Short(ScriptedPolicy):
        def generate(self, requests, params):
            return super().generate(requests, params)[:-1]

    trajectories = rollout([load_task(make_task())], harness(), Short(["```bash\nls\n```"]), n_per_task=2)
    assert {t.status for t in trajectories} == {"policy_error"}
    assert "1 completions for 2 requests" in trajectories[0].error


# -- token-in/token-out ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["terminus_json", "qwen_tools", "mini_bash"])
def test_buffer_holds_exactly_the_sampled_ids_and_suffix_observations(task, tokenizer, name):
    h = harness(name)
    policy = TokenPolicy(tokenizer, two_step(h))
    [t] = rollout([task], h, policy)
    sampled = policy.sampled[task.name]
    assert (t.status, t.reward, t.drift) == ("submitted", 1.0, 0)
    assert by_mask(t, 1) == [i for c in sampled for i in c.token_ids]
    assert [lp for lp, m in zip(t.logprobs, t.completion_mask) if m] == [lp for c in sampled for lp in c.logprobs]
    assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.completion_mask) if not m)
    first = tokenizer.apply_chat_template(t.messages[:2], tokenize=False, add_generation_prompt=True)
    assert t.prompt_ids == tokenizer.encode(first, add_special_tokens=False)
    # layout: reply 1 (mask 1), the observation's suffix (mask 0), reply 2 (mask 1)
    n1 = len(sampled[0].token_ids)
    env = t.completion_ids[n1: len(t.completion_ids) - len(sampled[1].token_ids)]
    assert t.completion_mask == [1] * n1 + [0] * len(env) + [1] * len(sampled[1].token_ids)
    rendered = tokenizer.apply_chat_template(t.messages[:4], tokenize=False, add_generation_prompt=True)
    assert rendered.endswith(tokenizer.decode(env)) and tokenizer.decode(env).endswith("<|im_start|>assistant\n")
    if name == "qwen_tools":
        assert "<tool_response>" in tokenizer.decode(env)


def test_a_reply_cut_at_max_tokens_is_closed_by_environment_tokens(task, tokenizer):
    h = harness(**{"limits.max_tokens_per_turn": 6, "limits.max_turns": 2})
    policy = TokenPolicy(tokenizer, lambda task, turn: "```bash\necho a long line that will not fit\n```")
    [t] = rollout([task], h, policy)
    first = policy.sampled[task.name][0]
    assert first.finish_reason == "length" and len(first.token_ids) == 6
    env = t.completion_ids[6: t.completion_mask.index(1, 6)]
    assert tokenizer.decode(env).startswith("<|im_end|>\n<|im_start|>user\nFormat error")
    assert (t.status, t.drift) == ("turn_limit", 0)


def test_a_turn_ended_by_another_stop_token_is_closed_the_templates_way(task, tokenizer):
    h = harness()
    policy = TokenPolicy(tokenizer, two_step(h), stop="<|endoftext|>")
    [t] = rollout([task], h, policy)
    n1 = len(policy.sampled[task.name][0].token_ids)
    assert tokenizer.decode(t.completion_ids[n1 - 1: n1 + 2]) == "<|endoftext|><|im_end|>\n"
    assert (t.status, t.reward, t.drift) == ("submitted", 1.0, 2)  # one per turn: the other stop token


def test_drift_counts_a_non_canonical_tokenization_but_ids_stay_as_sampled(task, tokenizer):
    h = harness()
    by_char = lambda text: [i for ch in text for i in tokenizer.encode(ch, add_special_tokens=False)]
    policy = TokenPolicy(tokenizer, two_step(h), encode=by_char)
    [t] = rollout([task], h, policy)
    assert by_mask(t, 1) == [i for c in policy.sampled[task.name] for i in c.token_ids]
    canonical = len(tokenizer.encode(render_action(h, [ANSWER], False), add_special_tokens=False))
    assert t.status == "submitted" and t.drift > 0 and canonical < len(policy.sampled[task.name][0].token_ids)


def test_token_limit_counts_the_buffer(task, tokenizer):
    h = harness(**{"limits.max_episode_tokens": 40})
    [t] = rollout([task], h, TokenPolicy(tokenizer, lambda task, turn: "```bash\necho " + "ab " * 12 + "\n```"))
    assert (t.status, t.turns) == ("token_limit", 1) and len(t.completion_ids) >= 40


def test_native_tools_go_through_the_chat_template(task, tokenizer):
    h = harness("qwen_tools", **{"action_format.native_tools": True})
    [t] = rollout([task], h, TokenPolicy(tokenizer, two_step(h)))
    prompt = tokenizer.decode(t.prompt_ids)
    assert "<tools>" in prompt and '"name": "write_file"' in prompt and (t.status, t.drift) == ("submitted", 0)


def test_last_k_elides_tokens_of_older_observations(task, tokenizer):
    h = harness(**{"context.history": "last_k", "context.k": 1})
    seen: list[list[int]] = []

    class Watching(TokenPolicy):
        def generate(self, requests, params):
            seen.extend(r.token_ids for r in requests)
            return super().generate(requests, params)

    replies = lambda task, turn: render_action(h, [f"echo step{turn}"], submit=turn == 3)
    [t] = rollout([task], h, Watching(tokenizer, replies))
    last = tokenizer.decode(seen[3])
    assert last.count(h.context.elided_text) == 2 and "step2" in last and "<returncode>" in last
    assert len(seen[3]) < len(t.prompt_ids) + len(t.completion_ids) and t.drift == 0


def test_text_only_policies_give_text_only_trajectories(task):
    h = harness()
    [t] = rollout([task], h, ScriptedPolicy([render_action(h, [ANSWER], True)]))
    assert (t.status, t.reward, t.drift) == ("submitted", 1.0, None)
    assert t.prompt_ids == t.completion_ids == t.completion_mask == t.logprobs == []
    assert t.tokens > 0 and [m["role"] for m in t.messages] == ["system", "user", "assistant"]


def test_the_tiny_model_samples_into_the_buffer(make_task, tmp_path):
    from coevo.policy.hf import HFPolicy
    from coevo.train.model import build_tiny_model

    class Recording(HFPolicy):
        def generate(self, requests, params):
            out = super().generate(requests, params)
            for r, c in zip(requests, out):
                self.sampled[(r.meta["task"], r.meta["turn"])] = c
            return out

    policy = Recording(build_tiny_model(tmp_path / "m", tmp_path, prompts_dir=REPO / "prompts"), device="cpu")
    policy.sampled = {}
    h = harness("terminus_json", **{"limits.max_turns": 2, "limits.max_tokens_per_turn": 12})
    tasks = [load_task(make_task(n)) for n in ("a", "b")]
    for t in rollout(tasks, h, policy, seed=3):
        sampled = [policy.sampled[(t.task, turn)] for turn in range(t.turns)]
        assert by_mask(t, 1) == [i for c in sampled for i in c.token_ids]
        assert [lp for lp, m in zip(t.logprobs, t.completion_mask) if m] == [lp for c in sampled for lp in c.logprobs]
        assert t.status in ("turn_limit", "format_errors", "submitted") and t.drift is not None


def test_a_slow_neighbour_does_not_time_out_a_fast_episode(make_task, tmp_path):
    """limits.wall_time_s counts an episode's own time. The slow task's sandbox start sleeps 3 s; the
    episodes run in lockstep, so the fast one waits that long before its first turn, but the wait is not
    its time: only the slow one times out. The real tiny model generates; each episode is charged its own
    share of each batched call, which is less than the call."""
    from coevo.policy.hf import HFPolicy
    from coevo.train.model import build_tiny_model

    policy = HFPolicy(build_tiny_model(tmp_path / "m", tmp_path, prompts_dir=REPO / "prompts"), device="cpu")
    h = harness(**{"initial_observation": "sleep $(cat /app/delay.txt); echo ready", "limits.wall_time_s": 2.0,
                   "limits.max_turns": 2, "limits.max_tokens_per_turn": 8, "recovery.max_format_retries": 3})
    fast, slow = (load_task(make_task(n, files={"environment/app/delay.txt": d})) for n, d in (("fast", "0"),
                                                                                              ("slow", "3")))
    by_task = {t.task: t for t in rollout([fast, slow], h, policy, seed=1)}
    assert by_task["slow"].status == "timeout" and "own time" in by_task["slow"].error
    assert by_task["fast"].status != "timeout" and by_task["fast"].turns == 2, by_task["fast"].error
    assert by_task["fast"].timing["start"] < 1.5 <= by_task["slow"].timing["start"]
    assert 0 < by_task["fast"].timing["generate"]


# -- files and `coevo show` ------------------------------------------------------------------------
def test_jsonl_round_trip_and_show(task, tokenizer, tmp_path):
    from typer.testing import CliRunner

    from coevo.cli import app

    h = harness("qwen_tools")
    trajectories = rollout([task], h, TokenPolicy(tokenizer, lambda task, turn: ["ls", *two_step(h)(task, 0).split("\n\n"),
                                                                                  render_action(h, [], True)][min(turn, 2)]))
    trajectories += rollout([task], h, ScriptedPolicy([render_action(h, ["ls /nowhere"], True)]))
    path = save_trajectories(tmp_path / "out" / "t.jsonl", trajectories)
    assert load_trajectories(path) == trajectories
    shown = CliRunner().invoke(app, ["show", str(path)], env={"COLUMNS": "120"})
    assert shown.exit_code == 0, shown.output
    assert all(s in shown.output for s in ("turn 1", "format error: No tool call found", "status", "submitted",
                                           "reward", "drift 0"))
    second = CliRunner().invoke(app, ["show", str(path), "--index", "1"], env={"COLUMNS": "120"})
    assert "$ ls /nowhere" in second.output and "No such file" in second.output
    bad = CliRunner().invoke(app, ["show", str(path), "--index", "5"])
    assert bad.exit_code == 2 and "holds 2 episodes" in bad.output
