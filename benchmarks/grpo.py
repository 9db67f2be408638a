"""GRPO capability and speed: dev pass@1 of a warm-started model before and after N GRPO steps (same
harness, same seed), each step's time breakdown, and the train/rollout mismatch of a bf16 rollout copy next
to an fp32 one.

    .venv/bin/python benchmarks/grpo.py --model WARM_MODEL [--tasks tasks] [--steps 30] [--samples 8]

Without --model it builds one first (init-model + warmstart; not counted in the GRPO time). Every number
comes from real episodes in sandboxes scored by the task verifiers. `--wall-time` raises the harness's
per-episode wall-time limit (same harness before, during and after) so that a slow or shared CPU does not
decide episodes: lockstep episodes wait for each other's generate calls.

    .venv/bin/python benchmarks/grpo.py --lora-vs-full --model smollm2-135m [--steps 3] [--lora-rank 8]

Speed and memory of the weights lever on a real model: the same short GRPO run (2 tasks x 2 episodes per
step, short replies) with full weights and with LoRA adapters, side by side: median seconds per step (and
its generate / train parts), peak resident memory, trainable parameters, and the train/rollout mismatch
(LoRA syncs merged weights into the rollout copy). Each arm runs in its own process, since peak RSS is per
process; no pass@1 is measured in this mode.

    .venv/bin/python benchmarks/grpo.py --routing-replay [--model WARM_MOE] [--steps 6]

Rollout routing replay on the tiny MoE (benchmarks/routing_replay.py): routing flips per layer, mismatch and
importance-ratio spread of bf16 rollouts against fp32 training with and without replay, and a short GRPO run
of each.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from coevo.harness import load_harness
from coevo.tasks import load_taskset
from coevo.train.grpo import TrainSpec, train_grpo

REPO = Path(__file__).resolve().parent.parent


def dev_pass(model: Path, harness, tasks: list, samples: int, seed: int):
    from coevo.evaluate import evaluate
    from coevo.policy.hf import HFPolicy

    start = time.perf_counter()
    report = evaluate(tasks, harness, HFPolicy(model, device="cpu"), samples=samples, seed=seed)
    return report.overall, time.perf_counter() - start


def build_model(out: Path, tasks_dir: Path, harness_path: Path, epochs: float | None) -> Path:
    from coevo.train.model import build_tiny_model
    from coevo.train.sft import SFTSettings
    from coevo.train.warmstart import run_warmstart

    base = build_tiny_model(out / "init", tasks_dir, seed=0)
    settings = SFTSettings() if epochs is None else SFTSettings(epochs=epochs)
    print(run_warmstart(base, harness_path, tasks_dir, "train", out / "warm", settings))
    return out / "warm"


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def mean(metrics: list[dict], key: str) -> float:
    values = [m[key] for m in metrics if key in m]
    return sum(values) / len(values) if values else float("nan")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="Warm-started model folder (default: build one).")
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks")
    parser.add_argument("--harness", type=Path, default=REPO / "harnesses" / "mini_bash.yaml")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench-grpo")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default 30; --lora-vs-full: 3).")
    parser.add_argument("--minutes", type=float, default=None, help="Also stop GRPO after this wall time.")
    parser.add_argument("--samples", type=int, default=8, help="Dev episodes per task for pass@1.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wall-time", type=float, default=1800.0, help="Harness limits.wall_time_s.")
    parser.add_argument("--warm-epochs", type=float, default=None, help="Warm start epochs (building only).")
    parser.add_argument("--mismatch-steps", type=int, default=2, help="Steps of each mismatch run (0: skip).")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="GRPO spec override (YAML value), e.g. --set learning_rate=2e-4.")
    parser.add_argument("--lora-vs-full", action="store_true", help="Time and memory of full weights vs LoRA.")
    parser.add_argument("--lora-rank", type=int, default=8, help="--lora-vs-full: the LoRA arm's rank.")
    parser.add_argument("--max-tokens", type=int, default=32, help="--lora-vs-full: tokens per reply.")
    parser.add_argument("--routing-replay", action="store_true",
                        help="MoE: flips, mismatch and GRPO with and without routing replay (R3).")
    parser.add_argument("--arm", choices=["full", "lora"], help=argparse.SUPPRESS)  # one arm, in a child process
    return parser.parse_args()


def main() -> None:
    import yaml

    args = parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if args.arm:
        return run_arm(args)
    if args.lora_vs_full:
        return lora_vs_full(args)
    if args.routing_replay:
        from routing_replay import run  # benchmarks/ is on the path of a script run from it

        return run(args)
    args.steps = args.steps or 30
    harness = load_harness(args.harness).with_overrides({"limits.wall_time_s": args.wall_time})
    taskset = load_taskset(args.tasks)
    train, dev = taskset.split("train"), taskset.split("dev")
    model = args.model or build_model(args.out / "model", args.tasks, args.harness, args.warm_epochs)
    overrides = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    # The recipe that moved the tiny model most in our runs: screen out families without signal, mask
    # no-signal groups, 16 tasks x 8 episodes per step (8 x 8 gave noisier steps and half the gain),
    # per-episode loss normalisation (dapo's token-level one let long failing episodes push the format
    # apart), lr 5e-4 with a small entropy penalty (TRL's entropy_coef < 0): without it, rates >= 5e-4
    # raised entropy and format errors to 20-28%; a strong one (-0.5 at 1e-3) collapsed onto wrong answers.
    # Fresh instances of the screened families (each used once): on the train split's 9 per family the
    # model memorised its train tasks and barely moved on dev. The final norm (the output's temperature)
    # at 100x the rate: at 1x, 30 steps sharpen the model too little to show; 50x gave +5.5, 200x +4.8.
    spec = TrainSpec(steps=args.steps, tasks_per_step=16, group_size=8, micro_batch_size=32, learning_rate=5e-4,
                    loss_type="grpo", trl={"entropy_coef": -0.2}, screen_samples=2, drop_no_signal_groups=True,
                    fresh_instances=True, lr_multipliers={"model.norm.weight": 100}, seed=args.seed,
                    max_minutes=args.minutes, save_rollouts=False).with_overrides(overrides)

    before, eval_s = dev_pass(model, harness, dev, args.samples, args.seed)
    run_dir = args.out / f"run-{int(time.time())}"
    t0, c0 = time.perf_counter(), cpu_seconds()
    result = train_grpo(model, harness, train, run_dir, spec)
    grpo_s, grpo_cpu = time.perf_counter() - t0, cpu_seconds() - c0
    after, _ = dev_pass(result.checkpoint, harness, dev, args.samples, args.seed)

    mismatch = {"fp32 (main run)": result.metrics}
    if args.mismatch_steps:
        short = spec.with_overrides({"steps": args.mismatch_steps, "max_minutes": None, "screen_samples": 0})
        for dtype in ("fp32", "bf16"):
            folder = run_dir.with_name(f"{run_dir.name}-{dtype}")
            mismatch[dtype] = train_grpo(model, harness, train, folder,
                                         short.with_overrides({"rollout_dtype": dtype})).metrics

    print_pass_table(model, harness, spec, train, dev, args, before, after, result)
    print(f"\nchange: **{100 * (after.pass_at_1 - before.pass_at_1):+.1f} points** dev pass@1; GRPO took "
          f"{grpo_s / 60:.1f} min wall, {grpo_cpu / 60:.1f} min CPU (user+sys, all threads); one dev eval "
          f"{eval_s:.0f} s\n")
    print_steps(result.metrics)
    print_mismatch(mismatch)
    (run_dir / "bench.json").write_text(json.dumps({
        "before": before.__dict__, "after": after.__dict__, "grpo_s": grpo_s, "grpo_cpu_s": grpo_cpu,
        "steps": result.steps, "spec": spec.model_dump(mode="json"), "model": str(model)}, indent=1))


def print_pass_table(model, harness, spec, train, dev, args, before, after, result) -> None:
    print(f"\n## GRPO on {len(train)} train tasks; dev pass@1 on {len(dev)} dev tasks x {args.samples} "
          "samples\n")
    print(f"model `{model}`, harness `{harness.name}` (wall_time_s {args.wall_time:g}), seed {args.seed}, "
          f"{result.steps} steps of {spec.tasks_per_step} tasks x {spec.group_size} episodes, lr "
          f"{spec.learning_rate:g}, loss {spec.loss_type}, reward {spec.reward}"
          f"{', on fresh instances of the screened families' if spec.fresh_instances else ''}"
          f"{''.join(f', lr x{f:g} for {p}' for p, f in spec.lr_multipliers.items())}\n")
    print("| | dev pass@1 | 95% CI | mean reward | format errors / turn | mean turns |")
    print("|---|---|---|---|---|---|")
    for name, s in (("before", before), (f"after {result.steps} steps", after)):
        print(f"| {name} | {s.pass_at_1:.3f} | [{s.ci_low:.3f}, {s.ci_high:.3f}] | {s.mean_reward:.3f} | "
              f"{s.format_error_rate:.3f} | {s.mean_turns:.2f} |")


def print_steps(metrics: list[dict]) -> None:
    columns = [("train reward", "reward/mean", ".3f"), ("pass rate", "pass_rate", ".3f"),
               ("no-signal groups", "groups/no_signal", ".0f"), ("generate s", "time/generate", ".1f"),
               ("sandbox s", "time/sandbox", ".1f"), ("verify s", "time/verify", ".1f"),
               ("mismatch s", "time/mismatch", ".1f"), ("train s", "time/train", ".1f"),
               ("step s", "time/step", ".1f")]
    print("### Per step\n")
    print("| step | " + " | ".join(c[0] for c in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for m in metrics:
        cells = (format(m.get(key, float("nan")), fmt) for _, key, fmt in columns)
        print(f"| {m['step']} | " + " | ".join(cells) + " |")
    print("| mean | " + " | ".join(format(mean(metrics, key), fmt) for _, key, fmt in columns) + " |")


def print_mismatch(runs: dict[str, list[dict]]) -> None:
    print("\n### Train/rollout mismatch (model tokens; mean over steps)\n")
    print("| rollout dtype | steps | Pearson | mean abs delta | max abs delta | KL (k3) | tokens/step |")
    print("|---|---|---|---|---|---|---|")
    for label, m in runs.items():
        print(f"| {label} | {len(m)} | {mean(m, 'mismatch/pearson'):.5f} "
              f"| {mean(m, 'mismatch/mean_abs_diff'):.2e} | {mean(m, 'mismatch/max_abs_diff'):.2e} "
              f"| {mean(m, 'mismatch/kl'):.2e} "
              f"| {mean(m, 'mismatch/tokens'):.0f} |")


def model_path(args) -> Path:
    from coevo.models import resolve_model

    if args.model is None:
        raise SystemExit("--lora-vs-full needs --model (a HF folder or a pulled name, e.g. smollm2-135m)")
    return resolve_model(args.model)


def lora_vs_full(args) -> None:
    """Both arms, each in a child process (its own peak RSS), then the table."""
    model, steps, stamp = model_path(args), args.steps or 3, int(time.time())
    arms = {}
    for arm in ("full", "lora"):
        out = args.out / f"{arm}-{stamp}"
        cmd = [sys.executable, __file__, "--arm", arm, "--model", str(model), "--tasks", str(args.tasks),
               "--harness", str(args.harness), "--out", str(out), "--steps", str(steps), "--seed", str(args.seed),
               "--wall-time", str(args.wall_time), "--lora-rank", str(args.lora_rank),
               "--max-tokens", str(args.max_tokens), *[x for item in args.set for x in ("--set", item)]]
        subprocess.run(cmd, check=True)
        arms[arm] = json.loads((out / "arm.json").read_text())
    print_arms(model, steps, arms)


def run_arm(args) -> None:
    """One arm's short GRPO run; writes OUT/arm.json (per-step metrics, peak RSS, trainable parameters)."""
    import yaml
    from safetensors import safe_open

    harness = load_harness(args.harness).with_overrides({
        "limits.wall_time_s": args.wall_time, "limits.max_tokens_per_turn": args.max_tokens, "limits.max_turns": 2})
    train = load_taskset(args.tasks).split("train")
    overrides = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    lora = {"rank": args.lora_rank} if args.arm == "lora" else {}
    spec = TrainSpec(steps=args.steps, tasks_per_step=2, group_size=2, save_steps=args.steps, keep_checkpoints=1,
                    save_rollouts=False, seed=args.seed, lora=lora).with_overrides(overrides)
    result = train_grpo(model_path(args), harness, train, args.out, spec)
    weights = result.checkpoint / ("adapter/adapter_model.safetensors" if spec.lora.enabled else "model.safetensors")
    with safe_open(str(weights), "pt") as f:  # tied embeddings are stored once
        trainable = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())  # noqa: SIM118 - not a dict
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    (args.out / "arm.json").write_text(json.dumps({"metrics": result.metrics, "peak_rss_mb": peak_mb,
                                                   "trainable": trainable, "spec": spec.model_dump(mode="json")}))


def print_arms(model: Path, steps: int, arms: dict[str, dict]) -> None:
    def median(arm: str, key: str) -> float:
        return statistics.median(m[key] for m in arms[arm]["metrics"] if key in m)

    spec = arms["full"]["spec"]
    print(f"\n## GRPO on `{model.name}`, full weights vs LoRA: {steps} steps of {spec['tasks_per_step']} tasks x "
          f"{spec['group_size']} episodes (medians over steps)\n")
    print("| weights | trainable params | s / step | generate s | train s | mismatch s | peak RSS | "
          "Pearson | mean abs delta |")
    print("|---|---|---|---|---|---|---|---|---|")
    for arm, a in arms.items():
        lora = a["spec"]["lora"]
        label = "full" if arm == "full" else f"LoRA r={lora['rank']} on {', '.join(lora['target_modules'])}"
        print(f"| {label} | {a['trainable'] / 1e6:.2f} M | {median(arm, 'time/step'):.1f} | "
              f"{median(arm, 'time/generate'):.1f} | {median(arm, 'time/train'):.1f} | "
              f"{median(arm, 'time/mismatch'):.1f} | {a['peak_rss_mb'] / 1024:.2f} GiB | "
              f"{median(arm, 'mismatch/pearson'):.5f} | {median(arm, 'mismatch/mean_abs_diff'):.1e} |")


if __name__ == "__main__":
    from coevo import logs

    logs.setup()  # the search's and the trainers' progress lines, as `coevo` shows them
    main()
