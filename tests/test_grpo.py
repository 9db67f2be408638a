"""The inner loop end to end: TRL GRPO on multi-turn episodes of the real tiny model in real sandboxes.

A freshly initialised model never solves a real task, so these tasks' verifiers pay random partial credit
(reward.json): the groups then carry real, nonzero advantages and GRPO must move the weights. Episodes are
kept short (16 tokens per reply, 2 turns): with a random model each reply is a format error, so every
episode holds model tokens and environment (feedback) tokens.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
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
    for i in range(4):
        write_task(root, f"coin-{i}", test_sh=COIN_TEST, instruction=f"Write {40 + i} to /app/answer.txt.\n")
    return root


@pytest.fixture(scope="module")
def tiny(coin_tasks, tmp_path_factory):
    from coevo.tasks.generate import generate_suite
    from coevo.train.model import build_tiny_model

    suite = tmp_path_factory.mktemp("suite") / "tasks"
    generate_suite(suite, seed=0, per_family=1)  # vocabulary for the tokenizer
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), suite, seed=0, prompts_dir=REPO / "prompts")


@pytest.fixture(scope="module")
def harness():
    from coevo.harness import load_harness

    return load_harness(REPO / "harnesses" / "mini_bash.yaml").with_overrides(SHORT)


def tasks_of(root: Path) -> list:
    from coevo.tasks import load_taskset

    return load_taskset(root).tasks


def spec(**kw):
    from coevo.train.grpo import TrainSpec

    return TrainSpec(**{"steps": 2, "group_size": 2, "tasks_per_step": 2, "reward": "partial", **kw})


def test_two_steps_change_weights_and_keep_env_tokens_out_of_the_loss(tiny, coin_tasks, harness, tmp_path):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from coevo.rollout import load_trajectories
    from coevo.train.grpo import train_grpo
    from coevo.train.grpo_rollout import rows_from_trajectories

    result = train_grpo(tiny, harness, tasks_of(coin_tasks), tmp_path / "run", spec(screen_samples=2))
    screened = json.loads((tmp_path / "run" / "screen.json").read_text())
    assert screened["signal"] == ["demo"] and len(screened["kept"]) == 4 and screened["episodes"] == 8
    assert result.steps == 2 and [m["step"] for m in result.metrics] == [1, 2]
    assert result.checkpoint == tmp_path / "run" / "checkpoints" / "checkpoint-2"
    before, after = load_file(tiny / "model.safetensors"), load_file(result.checkpoint / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)

    for m in result.metrics:
        assert m["mismatch/tokens"] > 0 and m["tokens/env"] > 0 and m["tokens/model"] > 0
        for key in ("mismatch/pearson", "mismatch/mean_abs_diff", "mismatch/max_abs_diff", "mismatch/kl"):
            assert math.isfinite(m[key]), key
        assert m["mismatch/pearson"] > 0.99  # fp32 rollout vs fp32 training: numerics only
        assert m["tokens/loss_region_drift"] == 0
        assert m["reward/std"] > 0 and m["groups/no_signal"] == 0
        assert {"loss", "reward", "time/generate", "time/sandbox", "time/verify", "time/train"} <= m.keys()

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    trajectories = load_trajectories(tmp_path / "run" / "rollouts" / "step-2.jsonl")
    rows = rows_from_trajectories(trajectories, tokenizer.pad_token_id)
    columns = rows["completion_ids"], rows["env_mask"], rows["logprobs"]
    for t, ids, mask, logprobs in zip(trajectories, *columns):
        assert ids == t.completion_ids and mask == t.completion_mask and len(logprobs) == len(ids)
        env_text = tokenizer.decode([i for i, m in zip(ids, mask) if not m])
        assert "<|im_start|>user" in env_text  # the format-error feedback is environment, mask 0
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if not m)


def test_loss_region_check_catches_a_changed_token(tiny, coin_tasks, harness, tmp_path):
    from coevo.policy.hf import HFPolicy
    from coevo.rollout import rollout
    from coevo.train.grpo_rollout import loss_region_drift

    [t] = rollout(tasks_of(coin_tasks)[:1], harness, HFPolicy(tiny, device="cpu"), seed=1)
    runs, current = [], []
    for tok, m in zip(t.completion_ids, t.completion_mask):
        if m:
            current.append(tok)
        elif current:
            runs.append(tuple(current))
            current = []
    sampled = {t.task: set(runs + ([tuple(current)] if current else []))}  # what the policy sampled
    assert loss_region_drift(t, t.completion_ids, t.completion_mask, sampled) == 0
    i = t.completion_mask.index(1)
    changed = list(t.completion_ids)
    changed[i] = (changed[i] + 1) % 100
    assert loss_region_drift(t, changed, t.completion_mask, sampled) > 0
    widened = [1] * len(t.completion_mask)  # environment tokens in the loss region
    assert loss_region_drift(t, t.completion_ids, widened, sampled) > 0


def test_bf16_rollout_mismatch_past_threshold_halts(tiny, coin_tasks, harness, tmp_path):
    from coevo.train.grpo import train_grpo
    from coevo.train.grpo_rollout import TrainingHalted

    s = spec(rollout_dtype="bf16").with_overrides({"mismatch.action": "halt",
                                                    "mismatch.max_mean_abs_diff": 1e-4})
    with pytest.raises(TrainingHalted, match=r"step 1: train/rollout mismatch: mean \|delta\|"):
        train_grpo(tiny, harness, tasks_of(coin_tasks), tmp_path / "run", s)
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / ".staging").exists()


def test_constrained_rollouts_are_judged_against_the_masked_training_forward(tiny, coin_tasks, harness, tmp_path):
    """Grammar-masked rollout logprobs against the training forward with the same masks replayed: numerics
    only, so a tight threshold holds; the plain forward (the grammar's gap) is reported beside it."""
    from coevo.rollout import load_trajectories
    from coevo.train.grpo import train_grpo

    constrained = harness.with_overrides({"action_format.constrained": True})
    s = spec(steps=1).with_overrides({"mismatch.action": "halt", "mismatch.max_mean_abs_diff": 1e-3})
    result = train_grpo(tiny, constrained, tasks_of(coin_tasks), tmp_path / "run", s)
    [m] = result.metrics
    assert m["mismatch/tokens"] > 0 and m["mismatch/pearson"] > 0.999 and m["mismatch/breach"] == 0
    assert m["mismatch/unmasked/mean_abs_diff"] > 100 * m["mismatch/mean_abs_diff"]
    assert {t.logprob_source for t in load_trajectories(tmp_path / "run" / "rollouts" / "step-1.jsonl")} == {
        "constrained"}


def test_killed_run_resumes_from_its_last_checkpoint(tiny, coin_tasks, harness, tmp_path):
    (tmp_path / "h.yaml").write_text(harness.to_yaml())
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "coevo.cli", "train", "--model", str(tiny), "--harness",
           str(tmp_path / "h.yaml"), "--tasks", str(coin_tasks), "--split", "all", "--out", str(run),
           "--steps", "3", "--group-size", "2", "--tasks-per-step", "2", "--reward", "partial"]
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while not (run / "checkpoints" / "checkpoint-1").exists():
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    saved = sorted(int(p.name.split("-")[1]) for p in (run / "checkpoints").iterdir())
    assert saved and saved[-1] < 3
    for step in saved:  # published checkpoints are always complete
        folder = run / "checkpoints" / f"checkpoint-{step}"
        assert json.loads((folder / "trainer_state.json").read_text())["global_step"] == step
        assert {"model.safetensors", "optimizer.pt", "rng_state.pth", "coevo_checkpoint.json"} <= {
            p.name for p in folder.iterdir()}

    done = subprocess.run([*cmd, "--resume"], check=False, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"3 steps (resumed from {saved[-1]})" in done.stdout
    state = json.loads((run / "checkpoints" / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["checkpoint-2", "checkpoint-3"]
    assert not (run / ".staging").exists()


def test_a_new_run_refuses_a_folder_with_checkpoints(tiny, coin_tasks, harness, tmp_path):
    from coevo.train.grpo import train_grpo

    (tmp_path / "run" / "checkpoints" / "checkpoint-3").mkdir(parents=True)
    with pytest.raises(ValueError, match="holds checkpoints .*resume"):
        train_grpo(tiny, harness, tasks_of(coin_tasks), tmp_path / "run", spec())


def test_spec_overrides_and_errors():
    from coevo.train.grpo import TrainSpec, spec_from_dict

    s = TrainSpec().with_overrides({"beta": 0.01, "mismatch.action": "skip", "trl.top_entropy_quantile": 0.2})
    assert (s.beta, s.mismatch.action, s.trl) == (0.01, "skip", {"top_entropy_quantile": 0.2})
    with pytest.raises(ValueError, match=r"unknown field 'betta' \(valid: steps, group_size"):
        TrainSpec().with_overrides({"betta": 0.1})
    with pytest.raises(ValueError, match=r"unknown field 'mismatch.act' \(valid: action, min_pearson"):
        TrainSpec().with_overrides({"mismatch.act": "halt"})
    with pytest.raises(ValueError, match=r"'beta.x': 'beta' is not a section \(sections: rollout_policy, mismatch, trl"):
        TrainSpec().with_overrides({"beta.x": 1})
    with pytest.raises(ValueError, match="micro_batch_size=3 must divide"):
        spec_from_dict({"tasks_per_step": 2, "group_size": 4, "micro_batch_size": 3}, "cfg.yaml")


def test_trl_fields_pass_through_to_grpo_config_by_name(harness, tmp_path):
    from coevo.train.grpo import grpo_config
    from coevo.train.spec import TRL_FIELDS

    s = spec(learning_rate=3e-5, loss_type="dr_grpo", beta=0.02, epsilon_high=0.28, num_iterations=2,
             importance_sampling_level="sequence", trl={"top_entropy_quantile": 0.2})
    config = grpo_config(s, harness, tmp_path)
    assert {name: getattr(config, name) for name in TRL_FIELDS} == {name: getattr(s, name) for name in TRL_FIELDS}
    assert config.top_entropy_quantile == 0.2  # any other GRPOConfig option, through `trl`
    with pytest.raises(ValueError, match=r"trl: \['no_such_option'\] are not TRL GRPOConfig options"):
        grpo_config(spec(trl={"no_such_option": 1}), harness, tmp_path)


def test_lr_multipliers_give_matching_parameters_their_own_rate(tiny, harness, tmp_path):
    from transformers import AutoModelForCausalLM

    from coevo.train.grpo import TrainSpec, _optimizer, grpo_config, spec_from_dict

    def optimizer_of(spec):
        return _optimizer(model, spec, grpo_config(spec, harness, tmp_path))

    model = AutoModelForCausalLM.from_pretrained(tiny)
    assert optimizer_of(TrainSpec()) is None  # TRL builds its default optimizer
    optimizer = optimizer_of(TrainSpec(learning_rate=1e-3, lr_multipliers={"model.norm.*": 50}))
    groups = sorted(optimizer.param_groups, key=lambda g: g["lr"])
    assert [g["lr"] for g in groups] == [1e-3, pytest.approx(5e-2)]
    assert groups[1]["params"] == [model.model.norm.weight]
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    with pytest.raises(ValueError, match=r"\['lm_head.bias'\] match no parameter"):
        optimizer_of(TrainSpec(lr_multipliers={"lm_head.bias": 2.0}))
    assert TrainSpec().with_overrides({"lr_multipliers.model.norm.weight": 100}).lr_multipliers == {
        "model.norm.weight": 100}
    with pytest.raises(ValueError, match=r"cfg.yaml: field 'lr_multipliers.model.norm.weight': .*greater than 0"):
        spec_from_dict({"lr_multipliers": {"model.norm.weight": 0}}, "cfg.yaml")


def test_rewards_groups_and_placeholder_rows():
    from coevo.rollout import Trajectory
    from coevo.train.grpo_rollout import no_signal_groups, reward_of, rows_from_trajectories

    ok = Trajectory(task="a", harness="h", status="submitted", reward=0.5, checks={"x": 1.0, "y": 0.0})
    broken = Trajectory(task="a", harness="h", status="sandbox_error")
    assert reward_of(ok, "binary") == 0.0 and reward_of(ok, "partial") == 0.5
    assert reward_of(broken, "binary") is None
    assert no_signal_groups([1.0, 1.0, 0.0, 1.0, None, 0.0], 2) == [0, 2]
    rows = rows_from_trajectories([broken], pad_id=7)
    assert rows == {"prompt_ids": [[7]], "completion_ids": [[7]], "logprobs": [[0.0]], "env_mask": [[0]]}


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (root)")
def test_a_full_disk_under_a_checkpoint_is_a_clear_error_and_resume_finishes(tiny, coin_tasks, harness, tmp_path):
    from coevo.train.grpo import train_grpo

    run = tmp_path / "run"
    run.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(run)], check=True)
    try:
        with pytest.raises(OSError, match=r"\.staging: writing a checkpoint failed .*No space left.*--resume"):
            train_grpo(tiny, harness, tasks_of(coin_tasks), run, spec(steps=1))
        assert not (run / ".staging").exists() and not list(run.glob("checkpoints/checkpoint-*"))
        subprocess.run(["mount", "-o", "remount,size=256m", str(run)], check=True)
        result = train_grpo(tiny, harness, tasks_of(coin_tasks), run, spec(steps=1), resume=True)
        assert result.steps == 1 and (run / "checkpoints" / "checkpoint-1" / "model.safetensors").is_file()
    finally:
        subprocess.run(["umount", "-l", str(run)], check=False)
