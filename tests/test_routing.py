"""Rollout routing replay (R3) on the real tiny MoE (`coevo init-model --moe`): the KV-cached rollout records
each sampled token's experts beside its id and logprob (also behind `coevo serve`), the training forward
replays them exactly, the router still learns, and dense models are left alone. Rollouts are bf16 against an
fp32 training forward, so the live routing really differs from the recorded one somewhere."""

from __future__ import annotations

import pytest
from routing_helpers import short_harness, training_model, used_routing


@pytest.fixture(scope="module")
def rollouts(tiny_moe, coin):
    """bf16 rollouts of the MoE: 2 tasks x 2 episodes, each with model and environment tokens."""
    from coevo.policy.hf import HFPolicy
    from coevo.rollout import rollout
    from coevo.tasks import load_taskset

    policy = HFPolicy(tiny_moe, device="cpu", dtype="bfloat16")
    return rollout(load_taskset(coin).tasks, short_harness(), policy, n_per_task=2, seed=1), policy.pad_id


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


def test_watching_changes_no_number_and_dense_models_record_nothing(rollouts, tiny_moe, tiny_dense, coin):
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
    [t] = rollout(load_taskset(coin).tasks[:1], short_harness(), dense, seed=1)
    assert t.routing == [] and sum(t.completion_mask) > 0
    assert attach(dense.model.to(torch.float32), replay=False) is None  # no hooks on a dense trainer


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
