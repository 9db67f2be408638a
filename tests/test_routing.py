"""Rollout routing replay (R3) on the real tiny MoE (`coevo init-model --moe`): the KV-cached rollout records
each sampled token's experts beside its id and logprob, the training forward replays them exactly, the router
still learns, and dense models are left alone. Rollouts are bf16 against an fp32 training forward, so the
live routing really differs from the recorded one somewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_task

REPO = Path(__file__).resolve().parents[1]
COIN_TEST = """#!/bin/bash
printf '{"a": 0.%05d, "b": 0.%05d}' $RANDOM $RANDOM > /logs/verifier/reward.json
"""
SHORT = {"limits.max_tokens_per_turn": 16, "limits.max_turns": 2}


@pytest.fixture(scope="module")
def coin_tasks(tmp_path_factory):
    root = tmp_path_factory.mktemp("coin") / "tasks"
    for i in range(2):
        write_task(root, f"coin-{i}", test_sh=COIN_TEST, instruction=f"Write {40 + i} to /app/answer.txt.\n")
    return root


@pytest.fixture(scope="session")
def suite(tmp_path_factory):
    from coevo.tasks.generate import generate_suite

    out = tmp_path_factory.mktemp("routing-suite") / "tasks"
    generate_suite(out, seed=0, per_family=1)  # vocabulary for the tokenizer
    return out


@pytest.fixture(scope="session")
def tiny_moe(suite, tmp_path_factory):
    from coevo.train.model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-moe"), suite, seed=0, prompts_dir=REPO / "prompts", moe=True)


@pytest.fixture(scope="module")
def tiny_dense(suite, tmp_path_factory):
    from coevo.train.model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-dense"), suite, seed=0, prompts_dir=REPO / "prompts")


@pytest.fixture(scope="module")
def harness():
    from coevo.harness import load_harness

    return load_harness(REPO / "harnesses" / "mini_bash.yaml").with_overrides(SHORT)


@pytest.fixture(scope="module")
def rollouts(tiny_moe, coin_tasks, harness):
    """bf16 rollouts of the MoE: 2 tasks x 2 episodes, each with model and environment tokens."""
    from coevo.policy.hf import HFPolicy
    from coevo.rollout import rollout
    from coevo.tasks import load_taskset

    policy = HFPolicy(tiny_moe, device="cpu", dtype="bfloat16")
    return rollout(load_taskset(coin_tasks).tasks, harness, policy, n_per_task=2, seed=1), policy.pad_id


def training_model(folder):
    """The fp32 model as GRPO trains it: with TRL's fused LM head, which the mismatch watch's forward uses."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    add_fused_lm_head(model, temperature=1.0)
    return model


def used_routing(model, trajectories) -> list[tuple[list, list]]:
    """(recorded, used by a training forward) per sampled token: the experts each forward took at the
    position that predicts the token, as hooks after any replay saw them."""
    import torch

    from coevo.train.routing import RoutingTaps

    taps, pairs = RoutingTaps(model), []
    for t in trajectories:
        ids = torch.tensor([t.prompt_ids + t.completion_ids])
        with torch.no_grad():
            model(input_ids=ids)
        chosen = taps.chosen(1, ids.shape[1])[0]
        for j, m in enumerate(t.completion_mask):
            if m:
                pairs.append(([sorted(e) for e in t.routing[j]],
                              [sorted(e) for e in chosen[len(t.prompt_ids) + j - 1].tolist()]))
    taps.close()
    return pairs


def test_the_rollout_records_each_sampled_tokens_experts_beside_it(rollouts, tiny_moe):
    import json

    from coevo.train.model import describe

    config = json.loads((tiny_moe / "config.json").read_text())
    assert config["model_type"] == "qwen3_moe" and "8 experts, top-2" in describe(tiny_moe)
    trajectories, _ = rollouts
    for t in trajectories:
        assert len(t.routing) == len(t.completion_ids) == len(t.logprobs)  # the token buffer's layout
        assert 0 < sum(t.completion_mask) < len(t.completion_mask)
        for r, m in zip(t.routing, t.completion_mask):
            assert len(r) == config["num_hidden_layers"] and all(len(e) == 2 for e in r)
            if m:  # two distinct real experts per layer
                assert all(len(set(e)) == 2 and all(0 <= x < 8 for x in e) for e in r)
            else:  # the sentinel, never expert 0
                assert all(e == [-1, -1] for e in r)


def test_the_moe_warm_starts_by_the_same_sft_and_then_decodes_and_records(tiny_moe, suite, tmp_path):
    """`coevo warmstart` trains the MoE's experts and routers; TRL's SFT saves it with output_router_logits on,
    which the rollout copy turns off (a KV-cached step's attention mask does not fit the load-balancing loss,
    which decoding does not need: a batch of 2 failed there)."""
    import json

    import torch
    from safetensors.torch import load_file

    from coevo import GenerationRequest, SamplingParams
    from coevo.policy.hf import HFPolicy
    from coevo.train.sft import SFTSettings
    from coevo.train.warmstart import run_warmstart

    out = tmp_path / "warm"
    run_warmstart(tiny_moe, REPO / "harnesses" / "mini_bash.yaml", suite, "train", out,
                  SFTSettings(epochs=1, lr=1e-3, batch_size=8), augment=0)
    before, after = load_file(tiny_moe / "model.safetensors"), load_file(out / "model.safetensors")
    router, experts = "model.layers.0.mlp.gate.weight", [k for k in before if ".layers.0.mlp.experts." in k]
    assert len(experts) == 8 * 3 and not torch.equal(before[router], after[router])
    assert all(not torch.equal(before[k], after[k]) for k in experts)  # each expert got tokens and learnt
    assert json.loads((out / "config.json").read_text())["output_router_logits"] is True
    policy = HFPolicy(out, device="cpu")
    prompt = policy.tokenizer.apply_chat_template([{"role": "user", "content": "List /app."}],
                                                  add_generation_prompt=True)["input_ids"]
    requests = [GenerationRequest(token_ids=prompt), GenerationRequest(token_ids=prompt[1:])]
    for c in policy.generate(requests, SamplingParams(max_tokens=8, temperature=1.0, seed=0)):
        assert len(c.routing) == len(c.token_ids) > 0


def test_replay_makes_the_training_forward_use_the_recorded_experts_on_every_token(rollouts, tiny_moe):
    from coevo.train import mismatch as mm
    from coevo.train.grpo_rollout import rows_from_trajectories
    from coevo.train.routing import RoutingReplay

    trajectories, pad_id = rollouts
    model = training_model(tiny_moe)
    live = used_routing(model, trajectories)
    flipped = sum(a != b for a, b in live)
    assert flipped > 0  # bf16 rollouts against fp32 training: live routing differs (4 of 115 tokens here)

    rows = rows_from_trajectories(trajectories, pad_id)
    replay = RoutingReplay(model, force=True)
    replay.remember(rows["prompt_ids"], rows["completion_ids"], [t.routing for t in trajectories])
    replayed = used_routing(model, trajectories)
    assert len(replayed) == sum(sum(t.completion_mask) for t in trajectories) > 0
    assert all(a == b for a, b in replayed)  # 100% of the generated tokens
    # The batched, padded forward of the mismatch watch finds every row and counts the flips it overrode.
    replay.reset_counts()
    mm.trainer_logprobs(model, rows["prompt_ids"], rows["completion_ids"], pad_id, batch_size=4)
    metrics = replay.metrics()
    assert metrics["routing/unknown_rows"] == 0 and metrics["routing/tokens"] == len(replayed)
    assert 0 <= metrics["routing/flip_frac"] <= 1 and (flipped == 0) == (metrics["routing/flip_frac"] == 0)
    replay.close()
    assert used_routing(model, trajectories) == live  # hooks gone: the live routing again


def test_the_router_still_gets_gradients_under_replay(rollouts, tiny_moe):
    import torch

    from coevo.train.routing import RoutingReplay, routers

    trajectories, _ = rollouts
    model = training_model(tiny_moe)
    replay = RoutingReplay(model, force=True)
    t = trajectories[0]
    replay.remember([t.prompt_ids], [t.completion_ids], [t.routing])
    ids = torch.tensor([t.prompt_ids + t.completion_ids])
    model(input_ids=ids).logits.logsumexp(-1).mean().backward()
    assert replay.counts["tokens"] == sum(t.completion_mask)
    for router in routers(model):
        assert router.weight.grad is not None and router.weight.grad.abs().sum() > 0


def test_watching_changes_no_number_and_dense_models_record_nothing(rollouts, tiny_moe, tiny_dense, coin_tasks,
                                                                    harness):
    import torch

    from coevo.policy.hf import HFPolicy
    from coevo.rollout import rollout
    from coevo.tasks import load_taskset
    from coevo.train import mismatch as mm
    from coevo.train.grpo_rollout import rows_from_trajectories
    from coevo.train.routing import RoutingReplay, attach

    trajectories, pad_id = rollouts
    rows = rows_from_trajectories(trajectories, pad_id)
    model = training_model(tiny_moe)
    plain = mm.trainer_logprobs(model, rows["prompt_ids"], rows["completion_ids"], pad_id, 4)
    watch = RoutingReplay(model, force=False)  # the switch off: flips counted, nothing replaced
    watch.remember(rows["prompt_ids"], rows["completion_ids"], [t.routing for t in trajectories])
    assert mm.trainer_logprobs(model, rows["prompt_ids"], rows["completion_ids"], pad_id, 4) == plain
    assert watch.counts["tokens"] > 0

    dense = HFPolicy(tiny_dense, device="cpu", dtype="bfloat16")
    assert dense.decoder.taps is None
    [t] = rollout(load_taskset(coin_tasks).tasks[:1], harness, dense, seed=1)
    assert t.routing == [] and sum(t.completion_mask) > 0
    assert attach(dense.model.to(torch.float32), replay=False) is None  # no hooks on a dense trainer


def test_routing_replay_on_a_dense_model_is_an_error_naming_the_field(tiny_dense, coin_tasks, harness, tmp_path):
    from coevo.tasks import load_taskset
    from coevo.train.grpo import TrainSpec, train_grpo
    from coevo.train.spec import TrainSpecError

    spec = TrainSpec(steps=1, group_size=2, tasks_per_step=2, routing_replay=True)
    with pytest.raises(TrainSpecError, match=rf"routing_replay: true needs a Mixture-of-Experts model, but "
                                              rf"{tiny_dense} is a dense qwen2 .*train\.routing_replay: false"):
        train_grpo(tiny_dense, harness, load_taskset(coin_tasks).tasks, tmp_path / "run", spec)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_grpo_step_with_replay_trains_the_moe_on_its_recorded_routing(tiny_moe, coin_tasks, harness, tmp_path):
    import torch
    from safetensors.torch import load_file

    from coevo.rollout import load_trajectories
    from coevo.tasks import load_taskset
    from coevo.train.grpo import TrainSpec, train_grpo

    spec = TrainSpec(steps=1, group_size=2, tasks_per_step=2, reward="partial", rollout_dtype="bf16",
                     routing_replay=True)
    result = train_grpo(tiny_moe, harness, load_taskset(coin_tasks).tasks, tmp_path / "run", spec)
    [m] = result.metrics
    [t0, *_] = trajectories = load_trajectories(tmp_path / "run" / "rollouts" / "step-1.jsonl")
    assert len(t0.routing) == len(t0.completion_ids)
    assert m["routing/tokens"] == m["tokens/model"] == sum(sum(t.completion_mask) for t in trajectories)
    assert m["routing/unknown_rows"] == 0 and 0 <= m["routing/flip_frac"] <= 1
    before, after = load_file(tiny_moe / "model.safetensors"), load_file(result.checkpoint / "model.safetensors")
    router = "model.layers.0.mlp.gate.weight"
    assert router in before and not torch.equal(before[router], after[router])  # the router trained too


def test_coevo_check_refuses_routing_replay_without_an_moe(tiny_dense, tiny_moe, suite, tmp_path):
    from coevo.search.preflight import Context, check_config, check_model
    from tests.search_helpers import write_config

    for model, fails in ((tiny_dense, True), (None, True), (tiny_moe, False)):
        fields = {"train": {"routing_replay": True}, **({"model": str(model)} if model else {})}
        context = Context(write_config(tmp_path, suite, **fields), {})
        check_config(context)
        if fails:
            with pytest.raises(ValueError, match=rf"{context.path}: train\.routing_replay: true needs a "
                                                 "Mixture-of-Experts model"):
                check_model(context)
        else:
            assert "chat template" in check_model(context)


def test_a_served_sessions_segment_records_routing_that_replays_exactly(tiny_moe):
    """An agent behind `coevo serve` (native harnesses): the session's token record carries the routing in the
    same layout, through the batching engine's cut, streamed or not."""
    from serve_helpers import MODEL, client, serving

    from coevo.policy.hf import HFPolicy
    from coevo.train.routing import RoutingReplay

    policy = HFPolicy(tiny_moe, device="cpu", dtype="bfloat16")
    with serving(policy, policy.tokenizer) as (server, app):
        api = client(server, "/sessions/moe/v1")
        messages = [{"role": "user", "content": "list the files"}]
        for turn, stream in enumerate((False, True, False)):
            reply = api.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, seed=turn,
                                                stream=stream, extra_body={"return_token_ids": True})
            text = ("".join(c.choices[0].delta.content or "" for c in reply if c.choices) if stream
                    else reply.choices[0].message.content)
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"turn {turn}"}]
        [segment] = app.state.served.sessions.pop("moe")
    assert segment.turns == 3 and len(segment.routing) == len(segment.completion_ids)
    for r, m in zip(segment.routing, segment.completion_mask):
        assert all(len(set(e)) == 2 and min(e) >= 0 for e in r) if m else all(e == [-1, -1] for e in r)
    model = training_model(tiny_moe)
    RoutingReplay(model).remember([segment.prompt_ids], [segment.completion_ids], [segment.routing])
    assert all(a == b for a, b in used_routing(model, [segment]))
