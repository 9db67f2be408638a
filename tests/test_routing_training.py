"""Routing replay where training meets it: the tiny MoE warm-starts by the same SFT as the dense model, a GRPO
step with `train.routing_replay` trains it on its recorded routing, and the switch on a dense model is an error
naming the field, at training and at `coevo check`."""

from __future__ import annotations

import pytest
from routing_helpers import REPO, short_harness


def test_the_moe_warm_starts_by_the_same_sft_and_then_decodes_and_records(tiny_moe, moe_suite, tmp_path):
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
    run_warmstart(tiny_moe, REPO / "harnesses" / "mini_bash.yaml", moe_suite, "train", out,
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


def test_routing_replay_on_a_dense_model_is_an_error_naming_the_field(tiny_dense, coin, tmp_path):
    from coevo.tasks import load_taskset
    from coevo.train.grpo import TrainSpec, train_grpo
    from coevo.train.spec import TrainSpecError

    spec = TrainSpec(steps=1, group_size=2, tasks_per_step=2, routing_replay=True)
    with pytest.raises(TrainSpecError, match=rf"routing_replay: true needs a Mixture-of-Experts model, but "
                                              rf"{tiny_dense} is a dense qwen2 .*train\.routing_replay: false"):
        train_grpo(tiny_dense, short_harness(), load_taskset(coin).tasks, tmp_path / "run", spec)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_grpo_step_with_replay_trains_the_moe_on_its_recorded_routing(tiny_moe, coin, tmp_path):
    import torch
    from safetensors.torch import load_file

    from coevo.rollout import load_trajectories
    from coevo.tasks import load_taskset
    from coevo.train.grpo import TrainSpec, train_grpo

    spec = TrainSpec(steps=1, group_size=2, tasks_per_step=2, reward="partial", rollout_dtype="bf16",
                     routing_replay=True)
    result = train_grpo(tiny_moe, short_harness(), load_taskset(coin).tasks, tmp_path / "run", spec)
    [m] = result.metrics
    [t0, *_] = trajectories = load_trajectories(tmp_path / "run" / "rollouts" / "step-1.jsonl")
    assert len(t0.routing) == len(t0.completion_ids)
    assert m["routing/tokens"] == m["tokens/model"] == sum(sum(t.completion_mask) for t in trajectories)
    assert m["routing/unknown_rows"] == 0 and 0 <= m["routing/flip_frac"] <= 1
    before, after = load_file(tiny_moe / "model.safetensors"), load_file(result.checkpoint / "model.safetensors")
    router = "model.layers.0.mlp.gate.weight"
    assert router in before and not torch.equal(before[router], after[router])  # the router trained too


def test_coevo_check_refuses_routing_replay_without_an_moe(tiny_dense, tiny_moe, moe_suite, tmp_path):
    from coevo.search.preflight import Context, check_config, check_model
    from tests.search_helpers import write_config

    for model, fails in ((tiny_dense, True), (None, True), (tiny_moe, False)):
        fields = {"train": {"routing_replay": True}, **({"model": str(model)} if model else {})}
        context = Context(write_config(tmp_path, moe_suite, **fields), {})
        check_config(context)
        if fails:
            with pytest.raises(ValueError, match=rf"{context.path}: train\.routing_replay: true needs a "
                                                 "Mixture-of-Experts model"):
                check_model(context)
        else:
            assert "chat template" in check_model(context)
