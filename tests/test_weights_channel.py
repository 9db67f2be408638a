"""The weights channel that always has a signal: the harvest sorts real episodes (real sandboxes and
verifiers, token buffers from the tiny model's tokenizer) into GRPO's frontier and self-SFT's examples,
self-SFT trains on exactly those tokens, and a harvest with nothing to learn from is a clear error. Also
the failure clusters that focus the next h-phase, on real episodes of each cause."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WRONG = "```bash\necho nope > /app/answer.txt\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from coevo.tasks.generate import generate_suite
    from coevo.train.model import build_tiny_model

    root = tmp_path_factory.mktemp("tiny")
    generate_suite(root / "suite", seed=0, per_family=1)
    return build_tiny_model(root / "model", root / "suite", seed=0, prompts_dir=REPO / "prompts")


@pytest.fixture
def three(make_task):
    from coevo.tasks import load_task

    return [load_task(make_task(name)) for name in ("frontier", "always", "never")]


def harness(**overrides):
    from coevo.harness import load_harness

    base = load_harness(REPO / "harnesses" / "mini_bash.yaml")
    return base.with_overrides({"limits.max_turns": 3, **overrides})


def episodes(tasks, h, tokenizer, wins: dict[str, int], k: int = 3):
    """k episodes per task, the first `wins[task]` played by the oracle, the rest by a wrong script."""
    from coevo.policy.scripted import OraclePolicy, ScriptedPolicy
    from coevo.rollout import rollout

    out = []
    for task in tasks:
        n = wins[task.name]
        if n:
            out += rollout([task], h, OraclePolicy(h, [task], tokenizer=tokenizer), n_per_task=n)
        if k - n:
            out += rollout([task], h, ScriptedPolicy([WRONG], tokenizer=tokenizer), n_per_task=k - n)
    return out


def test_harvest_sorts_real_episodes_and_self_sft_trains_on_their_tokens(tiny, three, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from coevo.harness.fingerprint import fingerprint
    from coevo.train.grpo_rollout import reward_of
    from coevo.train.harvest import harvest
    from coevo.train.spec import TrainSpec
    from coevo.train.weights import self_sft

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    h = harness()
    trajectories = episodes(three, h, tokenizer, {"frontier": 2, "always": 3, "never": 0})
    got = harvest(trajectories, fingerprint(h), lambda t: reward_of(t, "binary"), gap_weight=2)
    assert got.frontier == ["frontier"] and got.solved_every == ["always"] and got.never == ["never"]
    # frontier: 2 of 2 successes kept (gap weight 2); always: 1 of 3 (nothing left to learn); never: none
    assert len(got.rows) == 3
    assert got.dropped == {"failed": 4, "beyond_gap_weight": 2}
    wins = [t for t in trajectories if t.reward == 1.0]
    for row in got.rows:  # token in, token out: the sampled ids exactly, only the model's tokens in the loss
        match = [t for t in wins if row["input_ids"] == t.prompt_ids + t.completion_ids]
        assert match and row["assistant_masks"] == [0] * len(match[0].prompt_ids) + match[0].completion_mask
    assert all(0 < sum(r["assistant_masks"]) < len(r["input_ids"]) for r in got.rows)

    # A served agent's episode in two token records (segment 1 continues segment 0): one episode, and a
    # success trains on both records.
    first = next(t for t in trajectories if t.task == "frontier" and t.reward == 1.0)
    split = [t for t in trajectories if t is not first] + [first, first.model_copy(update={"segment": 1})]
    again = harvest(split, fingerprint(h), lambda t: reward_of(t, "binary"), gap_weight=2)
    assert again.episodes == got.episodes == 9 and len(again.rows) == len(got.rows) + 1

    other = harvest(trajectories, fingerprint(harness(**{"templates.system": "system_terse.j2"})),
                    lambda t: reward_of(t, "binary"))
    assert other.rows == [] and other.dropped["fingerprint"] == 5  # successes of another harness: not ours

    out = tmp_path / "sft"
    self_sft(tiny, got, out, TrainSpec(mode="sft", sft_epochs=1, sft_learning_rate=1e-3))
    before = AutoModelForCausalLM.from_pretrained(tiny).state_dict()
    after = AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert not (tmp_path / "sft.staging").exists()


def test_sft_mode_without_a_success_is_a_clear_error_and_keeps_what_it_sampled(tiny, three, tmp_path):
    """The untrained tiny model solves nothing: self-SFT refuses, naming why, and the harvest is on disk."""
    from coevo.train.spec import TrainSpec
    from coevo.train.weights import train_weights

    spec = TrainSpec(mode="sft", harvest_samples=2, temperature=1.0)
    short = harness(**{"limits.max_tokens_per_turn": 16, "limits.max_turns": 1})
    with pytest.raises(ValueError, match="no verified success to train on among 4 episodes"):
        train_weights(tiny, short, three[1:], tmp_path / "w", spec, log=lambda m: None)
    assert len((tmp_path / "w" / "harvest.jsonl").read_text().splitlines()) == 4
    assert '"never"' in (tmp_path / "w" / "harvest.json").read_text()


def test_failures_are_clustered_by_cause_and_focus_the_dimensions_that_address_the_largest(make_task):
    from coevo.policy.scripted import OraclePolicy, ScriptedPolicy
    from coevo.rollout import rollout
    from coevo.search.failures import clusters, focused_trials, largest
    from coevo.search.space_check import load_space
    from coevo.tasks import load_task

    task = load_task(make_task())
    h = harness(**{"limits.max_turns": 2, "recovery.max_format_retries": 0})
    replies = {
        "format_error": ["I would rather talk about it."],
        "no_submit": ["```bash\nls\n```"],
        "tool_error": ["```bash\nfalse\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"],
        "wrong_output": [WRONG],
    }
    trajectories = rollout([task], h, OraclePolicy(h, [task]))
    for why, script in replies.items():
        trajectories += rollout([task], h, ScriptedPolicy(script), n_per_task=2 if why == "wrong_output" else 1)
    counts = clusters(trajectories)
    assert counts == {"format_error": 1, "timeout": 0, "no_submit": 1, "tool_error": 1, "wrong_output": 2,
                      "boundary": 0}
    assert largest(counts) == "wrong_output"

    space = load_space(REPO / "search_spaces" / "compact.yaml", h)
    trials = focused_trials(space, h, counts, limit=4)
    assert len(trials) == 4
    current = {p.path: h.model_dump(mode="json") for p in space.harness_params}
    from coevo.config import get_dotted

    for params in trials:  # the harness as it is, with one dimension that addresses wrong output changed
        changed = [k for k, v in params.items() if v != get_dotted(current[k], k)]
        assert len(changed) == 1 and changed[0] in ("demonstrations.k", "recovery.self_check", "templates.instance",
                                                     "templates.system", "initial_observation")
    assert focused_trials(space, h, {"boundary": 3}, limit=4) == []  # nothing a harness can change
    # a dimension whose `when` does not hold (file tools under bash_block) is never the one changed
    for params in focused_trials(space, h, {**counts, "tool_error": 9}, limit=20):
        changed = [k for k, v in params.items() if v != get_dotted(current[k], k)]
        assert changed and not {"tools.read_file.enabled", "tools.write_file.enabled"} & set(changed)
    first = focused_trials(space, h, {**counts, "format_error": 9}, limit=1)[0]  # the most direct lever first
    assert first["action_format.constrained"] is True
