"""GRPO capability and speed: dev pass@1 of a warm-started model before and after N GRPO steps (same
harness, same seed), each step's time breakdown, and the train/rollout mismatch of a bf16 rollout copy next
to an fp32 one.

    .venv/bin/python benchmarks/grpo.py --model WARM_MODEL [--tasks tasks] [--steps 12] [--samples 2]

Without --model it builds one first (init-model + warmstart with --warm-epochs; not counted in the GRPO
time). Every number comes from real episodes in sandboxes scored by the task verifiers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

from coevo.harness import load_harness
from coevo.tasks import load_taskset
from coevo.train.grpo import GRPOSpec, train_grpo

REPO = Path(__file__).resolve().parent.parent


def dev_pass(model: Path, harness, tasks: list, samples: int, seed: int):
    from coevo.evaluate import evaluate
    from coevo.policy.hf import HFPolicy

    start = time.perf_counter()
    report = evaluate(tasks, harness, HFPolicy(model, device="cpu"), samples=samples, seed=seed)
    return report.overall, time.perf_counter() - start


def build_model(out: Path, tasks_dir: Path, harness_path: Path, epochs: float) -> Path:
    from coevo.train.model import build_tiny_model
    from coevo.train.warmstart import run_warmstart

    base = build_tiny_model(out / "init", tasks_dir, seed=0, prompts_dir=REPO / "prompts")
    print(run_warmstart(base, harness_path, tasks_dir, "train", out / "warm", epochs=epochs))
    return out / "warm"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime


def mean(metrics: list[dict], key: str) -> float:
    values = [m[key] for m in metrics if key in m]
    return sum(values) / len(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="Warm-started model folder (default: build one).")
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks")
    parser.add_argument("--harness", type=Path, default=REPO / "harnesses" / "mini_bash.yaml")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench-grpo")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--samples", type=int, default=2, help="Dev episodes per task for pass@1.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warm-epochs", type=float, default=6.0)
    parser.add_argument("--mismatch-steps", type=int, default=2, help="Steps of each mismatch run (0: skip).")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="GRPO spec override (YAML value), e.g. --set learning_rate=2e-4.")
    args = parser.parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import yaml

    harness = load_harness(args.harness)
    taskset = load_taskset(args.tasks)
    train, dev = taskset.split("train"), taskset.split("dev")
    model = args.model or build_model(args.out / "model", args.tasks, args.harness, args.warm_epochs)
    overrides = {k: yaml.safe_load(v) for k, _, v in (s.partition("=") for s in args.set)}
    spec = GRPOSpec(steps=args.steps, tasks_per_step=8, group_size=4, learning_rate=2e-4, seed=args.seed,
                    save_rollouts=False).with_overrides(overrides)

    before, eval_s = dev_pass(model, harness, dev, args.samples, args.seed)
    run_dir = args.out / f"run-{int(time.time())}"
    t0, c0 = time.perf_counter(), cpu_seconds()
    result = train_grpo(model, harness, train, run_dir, spec)
    grpo_s, grpo_cpu = time.perf_counter() - t0, cpu_seconds() - c0
    after, _ = dev_pass(result.checkpoint, harness, dev, args.samples, args.seed)

    mismatch = {"fp32": result.metrics}
    if args.mismatch_steps:
        short = spec.with_overrides({"steps": args.mismatch_steps, "save_steps": args.mismatch_steps})
        for dtype in ("fp32", "bf16"):
            res = train_grpo(model, harness, train, run_dir.with_name(run_dir.name + f"-{dtype}"),
                             short.with_overrides({"rollout_dtype": dtype}))
            mismatch[dtype] = res.metrics

    print(f"\n## GRPO on {len(train)} train tasks, dev pass@1 on {len(dev)} dev tasks x {args.samples} samples\n")
    print(f"model `{model}`, harness `{harness.name}`, seed {args.seed}, {spec.steps} steps of "
          f"{spec.tasks_per_step} tasks x {spec.group_size} episodes, lr {spec.learning_rate:g}, "
          f"loss {spec.loss_type}, reward {spec.reward}\n")
    print("| | dev pass@1 | 95% CI | mean reward | format errors / turn | mean turns |")
    print("|---|---|---|---|---|---|")
    for name, s in (("before", before), (f"after {result.steps} steps", after)):
        print(f"| {name} | {s.pass_at_1:.3f} | [{s.ci_low:.3f}, {s.ci_high:.3f}] | {s.mean_reward:.3f} | "
              f"{s.format_error_rate:.3f} | {s.mean_turns:.2f} |")
    print(f"\nchange: **{100 * (after.pass_at_1 - before.pass_at_1):+.1f} points** dev pass@1; GRPO took "
          f"{grpo_s / 60:.1f} min wall, {grpo_cpu / 60:.1f} min CPU (user+sys, all cores); one dev eval "
          f"{eval_s:.0f} s\n")

    print("### Per step (seconds)\n")
    print("| step | train reward | pass rate | no-signal groups | generate | sandbox | verify | mismatch | "
          "train | total |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in result.metrics:
        print(f"| {m['step']} | {m.get('reward/mean', 0):.3f} | {m.get('pass_rate', 0):.3f} | "
              f"{m.get('groups/no_signal', 0):.0f} | {m.get('time/generate', 0):.1f} | "
              f"{m.get('time/sandbox', 0):.1f} | {m.get('time/verify', 0):.1f} | {m.get('time/mismatch', 0):.1f} | "
              f"{m.get('time/train', 0):.1f} | {m.get('time/step', 0):.1f} |")

    print("\n### Train/rollout mismatch (model tokens; mean over steps)\n")
    print("| rollout dtype | steps | Pearson | mean abs delta | max abs delta | KL (k3) | tokens/step |")
    print("|---|---|---|---|---|---|---|")
    for dtype, metrics in mismatch.items():
        label = dtype + (" (main run)" if metrics is result.metrics else "")
        print(f"| {label} | {len(metrics)} | {mean(metrics, 'mismatch/pearson'):.5f} | "
              f"{mean(metrics, 'mismatch/mean_abs_diff'):.2e} | {mean(metrics, 'mismatch/max_abs_diff'):.2e} | "
              f"{mean(metrics, 'mismatch/kl'):.2e} | {mean(metrics, 'mismatch/tokens'):.0f} |")
    (run_dir / "bench.json").write_text(json.dumps({
        "before": before.__dict__, "after": after.__dict__, "grpo_s": grpo_s, "grpo_cpu_s": grpo_cpu,
        "spec": spec.model_dump(mode="json"), "model": str(model)}, indent=1, default=str))


if __name__ == "__main__":
    main()
