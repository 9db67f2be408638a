"""LoRA adapters and oracle replay on the real tiny model, real sandboxes and verifiers: GRPO and SFT with
adapters write plain HF folders (adapter merged, itself in adapter/) that HFPolicy loads, the rollout copy
samples from the merged weights (the mismatch stays ~1), a resumed run reloads the adapter, bad settings are
clear errors; self-SFT mixes replayed oracle demonstrations with the model's own successes and says how many
of each went in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_task

REPO = Path(__file__).resolve().parents[1]
COIN_TEST = """#!/bin/bash
printf '{"a": 0.%05d, "b": 0.%05d}' $RANDOM $RANDOM > /logs/verifier/reward.json
"""
SHORT = {"limits.max_tokens_per_turn": 16, "limits.max_turns": 2}
WRONG = "```bash\necho nope > /app/answer.txt\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


@pytest.fixture(scope="module")
def coin_tasks(tmp_path_factory):
    from coevo.tasks import load_taskset

    root = tmp_path_factory.mktemp("coin") / "tasks"
    for i in range(2):
        write_task(root, f"coin-{i}", test_sh=COIN_TEST, instruction=f"Write {40 + i} to /app/answer.txt.\n")
    return load_taskset(root).tasks


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from coevo.tasks.generate import generate_suite
    from coevo.train.model import build_tiny_model

    root = tmp_path_factory.mktemp("tiny")
    generate_suite(root / "suite", seed=0, per_family=1)
    return build_tiny_model(root / "model", root / "suite", seed=0, prompts_dir=REPO / "prompts")


@pytest.fixture(scope="module")
def harness():
    from coevo.harness import load_harness

    return load_harness(REPO / "harnesses" / "mini_bash.yaml")


def train_spec(**kw):
    from coevo.train.spec import TrainSpec

    return TrainSpec(**{"steps": 2, "group_size": 2, "tasks_per_step": 2, "reward": "partial",
                       "learning_rate": 1e-2, "lora": {"rank": 4, "target_modules": ["q_proj", "v_proj"]}, **kw})


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def assert_plain_lora_folder(start: Path, folder: Path, adapted: tuple[str, ...]) -> None:
    """A plain model folder (no adapter at its top), the adapter in adapter/, only adapted layers changed."""
    import torch

    from coevo.policy.hf import HFPolicy

    assert (folder / "config.json").is_file() and not (folder / "adapter_config.json").exists()
    assert json.loads((folder / "adapter" / "adapter_config.json").read_text())["r"] == 4
    policy = HFPolicy(folder, device="cpu")
    assert type(policy.model).__name__ == "Qwen2ForCausalLM"
    before, after = weights(start), weights(folder)
    assert before.keys() == after.keys()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.rsplit(".", 2)[-2] in adapted for k in changed), sorted(changed)[:5]


def test_lora_grpo_writes_plain_checkpoints_syncs_merged_weights_and_resumes(tiny, coin_tasks, harness, tmp_path):
    import torch
    from safetensors.torch import load_file

    from coevo.train import lora
    from coevo.train.grpo import _make_trainer, train_grpo
    from coevo.train.lora import LoraError

    h = harness.with_overrides(SHORT)
    run = tmp_path / "run"
    result = train_grpo(tiny, h, coin_tasks, run, train_spec())
    assert result.steps == 2 and result.checkpoint.name == "checkpoint-2"
    assert_plain_lora_folder(tiny, result.checkpoint, ("q_proj", "v_proj"))
    assert {"optimizer.pt", "trainer_state.json"} <= {p.name for p in result.checkpoint.iterdir()}
    for m in result.metrics:  # the rollout copy samples from the merged weights the trainer scores
        assert m["mismatch/tokens"] > 0 and m["mismatch/pearson"] > 0.99 and m["mismatch/mean_abs_diff"] < 1e-3

    # What a resume loads: the checkpoint's adapter on the base model gives exactly its merged weights.
    trainer = _make_trainer(tiny, h, coin_tasks, tmp_path / "probe", train_spec())
    trainer._load_from_checkpoint(str(result.checkpoint))
    merged, saved = lora.merged_state_dict(trainer.model), load_file(result.checkpoint / "model.safetensors")
    assert all(torch.allclose(merged[k], saved[k], atol=1e-6) for k in saved)

    resumed = train_grpo(tiny, h, coin_tasks, run, train_spec(steps=3), resume=True)
    assert (resumed.steps, resumed.resumed_from) == (3, 2)
    assert_plain_lora_folder(tiny, resumed.checkpoint, ("q_proj", "v_proj"))
    with pytest.raises(LoraError, match=r"trained with lora .*'rank': 4.* this run asks for .*'rank': 8"):
        train_grpo(tiny, h, coin_tasks, run, train_spec(steps=4, lora={"rank": 8}), resume=True)


def test_lora_warm_start_writes_a_plain_model_folder(tiny, tmp_path):
    from coevo.tasks.generate import generate_suite
    from coevo.train.lora import LoraSpec
    from coevo.train.sft import SFTSettings
    from coevo.train.warmstart import run_warmstart

    suite = tmp_path / "suite"
    generate_suite(suite, seed=0, per_family=1)
    settings = SFTSettings(epochs=1, lr=1e-2, batch_size=8, lora=LoraSpec(rank=4, target_modules=["q_proj",
                                                                                                  "down_proj"]))
    out = tmp_path / "ws"
    report = run_warmstart(tiny, REPO / "harnesses" / "mini_bash.yaml", suite, "train", out, settings, augment=0)
    assert "SFT:" in report
    assert_plain_lora_folder(tiny, out, ("q_proj", "down_proj"))
    assert json.loads((out / "warmstart.json").read_text())["settings"]["lora"]["rank"] == 4


def test_bad_lora_settings_are_clear_errors(tiny, coin_tasks, harness, tmp_path):
    from coevo.train.grpo import train_grpo
    from coevo.train.lora import LoraError, lora_from_items
    from coevo.train.sft import SFTSettings, train_sft
    from coevo.train.spec import spec_from_dict

    layers = "its linear layers: down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, v_proj"
    with pytest.raises(LoraError, match=rf"training spec: lora.target_modules: \['qkv_proj'\] is not a linear layer "
                                        rf"of this model \(Qwen2ForCausalLM\); {layers}"):
        train_grpo(tiny, harness.with_overrides(SHORT), coin_tasks, tmp_path / "run",
                   train_spec(lora={"rank": 4, "target_modules": ["q_proj", "qkv_proj"]}))
    assert not (tmp_path / "run" / "checkpoints").exists()
    row = {"input_ids": [1, 2, 3, 4], "assistant_masks": [0, 0, 1, 1]}
    with pytest.raises(LoraError, match=rf"self-SFT: SFT settings: lora.target_modules: \['mlp'\] .*{layers}"):
        train_sft(tiny, [row], tmp_path / "sft", SFTSettings(lora=lora_from_items(
            ["rank=2", "target_modules=[mlp]"], "--lora")), source="self-SFT")
    with pytest.raises(ValueError, match=r"cfg.yaml: field 'lora.rank': .*greater than or equal to 0"):
        spec_from_dict({"lora": {"rank": -1}}, "cfg.yaml")
    with pytest.raises(ValueError, match=r"field 'lora.target_modules': .*lm_head cannot carry an adapter"):
        spec_from_dict({"lora": {"rank": 4, "target_modules": ["lm_head"]}}, "cfg.yaml")
    with pytest.raises(ValueError, match=r"unknown field 'lora.rnak' \(valid: rank, alpha, dropout, target_modules"):
        spec_from_dict({}, "cfg.yaml").with_overrides({"lora.rnak": 4})
    with pytest.raises(LoraError, match=r"--lora: field 'lora.dropout': Input should be less than 1"):
        lora_from_items(["dropout=1.5"], "--lora")


def test_self_sft_mixes_replayed_oracle_demonstrations_and_logs_both_counts(tiny, make_task, harness, tmp_path):
    """Own successes come from real scripted episodes kept as the harvest (the file a resumed run reads)."""
    import torch
    from transformers import AutoTokenizer

    from coevo.policy.scripted import OraclePolicy, ScriptedPolicy
    from coevo.rollout import load_trajectories, rollout, save_trajectories
    from coevo.tasks import load_task
    from coevo.train.grpo import training_harness
    from coevo.train.spec import TrainSpec
    from coevo.train.weights import train_weights

    tasks = [load_task(make_task(name)) for name in ("frontier", "always", "never")]
    spec = TrainSpec(mode="sft", harvest_samples=2, replay_ratio=0.5, sft_epochs=1, sft_learning_rate=1e-3)
    h = training_harness(harness.with_overrides({"limits.max_turns": 3}), spec)
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    wins = {"frontier": 1, "always": 2, "never": 0}
    episodes = []
    for task in tasks:
        n = wins[task.name]
        episodes += rollout([task], h, OraclePolicy(h, [task], tokenizer=tokenizer), n_per_task=n) if n else []
        episodes += rollout([task], h, ScriptedPolicy([WRONG], tokenizer=tokenizer), n_per_task=2 - n) if n < 2 else []
    out = tmp_path / "w"
    save_trajectories(out / "harvest.jsonl", episodes)

    lines = []
    result = train_weights(tiny, h, tasks, out, spec, log=lines.append)
    m = result.metrics[0]
    # frontier: its 1 success x gap weight 2 -> 1; always: 1 copy -> 2 own examples; ceil(0.5 x 2) = 1 replayed
    assert (m["harvest/examples"], m["replay/oracle_examples"], m["replay/asked"]) == (2, 1.0, 1.0)
    assert "self-SFT on 2 own examples + 1 replayed oracle demonstrations" in lines[-1]
    assert "oracle replay: 1 demonstrations (replay_ratio 0.5, replay_min 0 asked for 1)" in result.summary
    [replayed] = load_trajectories(out / "replay.jsonl")
    assert replayed.task == "never" and replayed.reward == 1.0  # never-solved tasks come first
    before, after = weights(tiny), weights(result.checkpoint)
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_replay_min_trains_a_model_that_solved_nothing_on_oracle_demonstrations(tiny, make_task, harness, tmp_path):
    """A model as shipped may solve nothing under a harness: with replay_min the weights channel still
    trains, on verified oracle episodes rendered under that harness; without it, it says why it cannot."""
    import torch
    from transformers import AutoTokenizer

    from coevo.policy.scripted import ScriptedPolicy
    from coevo.rollout import rollout, save_trajectories
    from coevo.tasks import load_task
    from coevo.train.grpo import training_harness
    from coevo.train.spec import TrainSpec
    from coevo.train.weights import train_weights

    tasks = [load_task(make_task(name)) for name in ("never", "nor-this")]
    spec = TrainSpec(mode="sft", harvest_samples=1, sft_epochs=1, sft_learning_rate=1e-3)
    h = training_harness(harness.with_overrides({"limits.max_turns": 3}), spec)
    failed = rollout(tasks, h, ScriptedPolicy([WRONG], tokenizer=AutoTokenizer.from_pretrained(tiny)))
    for name in ("plain", "min"):
        save_trajectories(tmp_path / name / "harvest.jsonl", failed)
    with pytest.raises(ValueError, match="no verified success to train on"):
        train_weights(tiny, h, tasks, tmp_path / "plain", spec)
    result = train_weights(tiny, h, tasks, tmp_path / "min", spec.with_overrides({"replay_min": 2}))
    m = result.metrics[0]
    assert (m["harvest/examples"], m["replay/oracle_examples"], m["replay/asked"]) == (0, 2.0, 2.0)
    assert "replay_min 2 asked for 2" in result.summary
    before, after = weights(tiny), weights(result.checkpoint)
    assert any(not torch.equal(before[k], after[k]) for k in before)
