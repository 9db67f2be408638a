"""Rollout routing replay (R3) on the tiny MoE: what a bf16 rollout copy does to an fp32 training forward's
expert routing and logprobs, with and without replay, and a short GRPO run of each. Run through grpo.py:

    .venv/bin/python benchmarks/grpo.py --routing-replay [--model WARM_MOE] [--steps 6] [--seed 0]

Without --model it builds one first: `coevo init-model --moe`, then the warm start (`--warm-epochs`, 2 by
default; not counted). Part 1 rolls out train tasks once with the bf16 copy (routing recorded) and scores the
same tokens with the fp32 model twice, routing live and replayed (then the same with an fp32 copy, the
control): per layer, the fraction of sampled tokens
whose experts at the position that predicts them differ from the rollout's; the logprob mismatch; and the
spread of the importance ratio pi_train / pi_rollout over model tokens. Part 2 trains GRPO from the same
weights and seed with `routing_replay` off and on (bf16 rollouts both): the reward per step and what the
mismatch watch measured on each step's rollouts. Every number comes from real episodes in sandboxes.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

TASKS, GROUP = 16, 4
"""Part 1: train tasks x episodes each (one bf16 rollout, scored both ways)."""
LIMITS = {"limits.max_turns": 4, "limits.max_tokens_per_turn": 64}
"""Short episodes: 2 shared cores."""
CLIP = 0.2
"""PPO's clip range (TrainSpec.epsilon): a ratio outside 1 +- this is cut from the gradient."""


def build_moe(out: Path, tasks_dir: Path, harness_path: Path, epochs: float) -> Path:
    from coevo.train.model import build_tiny_model
    from coevo.train.sft import SFTSettings
    from coevo.train.warmstart import run_warmstart

    base = build_tiny_model(out / "init", tasks_dir, seed=0, moe=True)
    print(run_warmstart(base, harness_path, tasks_dir, "train", out / "warm", SFTSettings(epochs=epochs)))
    return out / "warm"


def used_flips(model, trajectories) -> list[float]:
    """Per MoE layer, the fraction of sampled tokens whose experts in `model`'s forward (after any replay), at
    the position that predicts the token, differ from those the rollout recorded."""
    import torch

    from coevo.train.routing import RoutingTaps

    taps = RoutingTaps(model)
    flips, n = [0] * len(taps.routers), 0
    for t in trajectories:
        at = [len(t.prompt_ids) + j - 1 for j, m in enumerate(t.completion_mask) if m]
        if not at:
            continue
        ids = torch.tensor([t.prompt_ids + t.completion_ids])
        with torch.no_grad():
            model(input_ids=ids)
        used = taps.chosen(1, ids.shape[1])[0, at].sort(-1).values  # (tokens, layers, top_k)
        recorded = torch.tensor([t.routing[j] for j, m in enumerate(t.completion_mask) if m]).sort(-1).values
        differs = (used != recorded).any(-1)  # (tokens, layers)
        flips = [f + int(d) for f, d in zip(flips, differs.sum(0))]
        n += len(at)
    taps.close()
    return [f / max(1, n) for f in flips]


def ratio_spread(trainer_lp, rollout_lp, masks) -> dict[str, float]:
    ratios = [math.exp(t - r) for tl, rl, ml in zip(trainer_lp, rollout_lp, masks)
              for t, r, m in zip(tl, rl, ml) if m]
    return {"std": statistics.pstdev(ratios), "max_dev": max(abs(r - 1) for r in ratios),
            "clipped": sum(abs(r - 1) > CLIP for r in ratios) / len(ratios)}


def measure(model_dir: Path, harness, tasks: list, seed: int, dtype: str) -> tuple[dict, int]:
    """Part 1: one rollout of the `dtype` copy, the fp32 forward with routing live and replayed."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from coevo.policy.hf import HFPolicy
    from coevo.rollout import rollout
    from coevo.train import mismatch as mm
    from coevo.train.grpo_rollout import rows_from_trajectories
    from coevo.train.routing import RoutingReplay

    policy = HFPolicy(model_dir, device="cpu", dtype=dtype)
    trajectories = rollout(tasks[:TASKS], harness, policy, n_per_task=GROUP, seed=seed)
    rows = rows_from_trajectories(trajectories, policy.pad_id)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    add_fused_lm_head(model, temperature=harness.decoding.temperature)  # as GRPOTrainer scores
    arms = {}
    short = {"bfloat16": "bf16", "float32": "fp32"}[dtype]
    for label, force in ((f"{short} rollout, routing live", False), (f"{short} rollout, routing replayed", True)):
        replay = RoutingReplay(model, force=force)
        replay.remember(rows["prompt_ids"], rows["completion_ids"], [t.routing for t in trajectories])
        lp = mm.trainer_logprobs(model, rows["prompt_ids"], rows["completion_ids"], policy.pad_id, 8)
        arms[label] = {"flips": used_flips(model, trajectories), "mismatch": mm.measure(lp, rows["logprobs"],
                                                                                        rows["env_mask"]),
                       "ratio": ratio_spread(lp, rows["logprobs"], rows["env_mask"])}
        replay.close()
    return arms, len(trajectories)


def train_both(model_dir: Path, harness, train: list, out: Path, steps: int, seed: int, overrides: dict) -> dict:
    """Part 2: the same short GRPO run with routing_replay off and on."""
    from coevo.train.grpo import TrainSpec, train_grpo

    runs = {}
    for label, on in (("off", False), ("on", True)):
        spec = TrainSpec(steps=steps, tasks_per_step=4, group_size=4, reward="partial", loss_type="grpo",
                         learning_rate=5e-4, rollout_dtype="bf16", routing_replay=on, seed=seed,
                         save_rollouts=False, save_steps=steps, keep_checkpoints=1).with_overrides(overrides)
        t0 = time.perf_counter()
        runs[label] = (train_grpo(model_dir, harness, train, out / f"grpo-replay-{label}", spec).metrics,
                       time.perf_counter() - t0)
    return runs


def run(args) -> None:
    import yaml

    from coevo.harness import load_harness
    from coevo.tasks import load_taskset

    out = args.out / f"routing-replay-{int(time.time())}"
    harness = load_harness(args.harness).with_overrides({**LIMITS, "limits.wall_time_s": args.wall_time})
    train = load_taskset(args.tasks).split("train")
    model = args.model or build_moe(out / "model", args.tasks, args.harness, args.warm_epochs or 2.0)
    overrides = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    t0, arms = time.perf_counter(), {}
    for dtype in ("bfloat16", "float32"):  # fp32: the control, where only kernels and batch shapes differ
        rows, episodes = measure(Path(model), harness, train, args.seed, dtype)
        arms.update(rows)
    measure_s = time.perf_counter() - t0
    runs = train_both(Path(model), harness, train, out, args.steps or 6, args.seed, overrides)
    print_measure(model, harness, arms, episodes, measure_s)
    print_runs(runs)


def print_measure(model, harness, arms: dict, episodes: int, seconds: float) -> None:
    layers = len(next(iter(arms.values()))["flips"])
    print("\n## Routing replay (R3) on the tiny MoE: rollouts scored by the fp32 training forward\n")
    print(f"model `{model}`, harness `{harness.name}` (max_turns {harness.limits.max_turns}, "
          f"{harness.limits.max_tokens_per_turn} tokens a turn), {episodes} episodes ({TASKS} train tasks x "
          f"{GROUP}) per rollout dtype; {seconds:.0f} s\n")
    head = " | ".join(f"flips L{i}" for i in range(layers))
    print(f"| training forward | {head} | flips, all layers | Pearson | mean abs delta | max abs delta | KL (k3) "
          f"| ratio std | max abs(ratio - 1) | ratios outside 1 +- {CLIP:g} | sampled tokens |")
    print("|---" * (layers + 10) + "|")
    for label, a in arms.items():
        m, r = a["mismatch"], a["ratio"]
        flips = " | ".join(f"{100 * f:.2f}%" for f in a["flips"])
        print(f"| {label} | {flips} | {100 * sum(a['flips']) / layers:.2f}% | {m.pearson:.6f} | "
              f"{m.mean_abs_diff:.2e} | {m.max_abs_diff:.2e} | {m.kl:.2e} | {r['std']:.2e} | {r['max_dev']:.2e} | "
              f"{100 * r['clipped']:.2f}% | {m.tokens} |")


def print_runs(runs: dict) -> None:
    (off, off_s), (on, on_s) = runs["off"], runs["on"]
    print(f"\n### GRPO with routing_replay off and on: {len(off)} steps of 4 tasks x 4 episodes, bf16 rollouts "
          f"({off_s / 60:.1f} and {on_s / 60:.1f} min)\n")
    print("Flips: the live router's choice against the rollout's on the step's sampled tokens (replay overrides "
          "them); mismatch: the watch's forward, with the routing the loss uses.\n")
    print("| step | reward off | reward on | flips off | flips on | mean abs delta off | mean abs delta on "
          "| KL off | KL on |")
    print("|---|---|---|---|---|---|---|---|---|")
    for a, b in zip(off, on):
        print(f"| {a['step']} | {a['reward/mean']:.3f} | {b['reward/mean']:.3f} | "
              f"{100 * a['routing/flip_frac']:.2f}% | {100 * b['routing/flip_frac']:.2f}% | "
              f"{a['mismatch/mean_abs_diff']:.2e} | {b['mismatch/mean_abs_diff']:.2e} | "
              f"{a['mismatch/kl']:.2e} | {b['mismatch/kl']:.2e} |")

    def avg(ms, key):
        return sum(m[key] for m in ms) / len(ms)

    print(f"| mean | {avg(off, 'reward/mean'):.3f} | {avg(on, 'reward/mean'):.3f} | "
          f"{100 * avg(off, 'routing/flip_frac'):.2f}% | {100 * avg(on, 'routing/flip_frac'):.2f}% | "
          f"{avg(off, 'mismatch/mean_abs_diff'):.2e} | {avg(on, 'mismatch/mean_abs_diff'):.2e} | "
          f"{avg(off, 'mismatch/kl'):.2e} | {avg(on, 'mismatch/kl'):.2e} |")
