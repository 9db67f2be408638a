"""Warm-start capability: dev pass@1 of the tiny model after `coevo warmstart` under one harness, scored
under every base harness side by side (the harness it was trained on, and the others).

    .venv/bin/python benchmarks/warmstart.py [--train-harness harnesses/mini_bash.yaml] [--model WARM_DIR]

Without --model it runs `coevo init-model` + `coevo warmstart` with the defaults first and reports how
long that took. Every number comes from real episodes in sandboxes scored by the task verifiers.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from coevo.evaluate import evaluate
from coevo.harness import load_harness
from coevo.policy.hf import HFPolicy
from coevo.tasks import load_taskset
from coevo.train.sft import SFTSettings

REPO = Path(__file__).resolve().parent.parent


def build(out: Path, tasks: Path, harness: Path, augment: int) -> tuple[Path, float]:
    from coevo.train.model import build_tiny_model
    from coevo.train.warmstart import run_warmstart

    start = time.perf_counter()
    base = build_tiny_model(out / "init", tasks, seed=0)
    print(run_warmstart(base, harness, tasks, "train", out / "warm", SFTSettings(), augment=augment))
    return out / "warm", time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="Warm-started model folder (default: build one).")
    parser.add_argument("--train-harness", type=Path, default=REPO / "harnesses" / "mini_bash.yaml")
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "bench-warmstart")
    parser.add_argument("--augment", type=int, default=None, help="Default: as coevo warmstart.")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    built = ""
    if args.model is None:
        args.model, seconds = build(args.out, args.tasks, args.train_harness, args.augment)
        built = f", built here in {seconds / 60:.1f} min (init-model + warmstart)"
    dev = load_taskset(args.tasks).split("dev")
    policy = HFPolicy(args.model, device="cpu")
    trained_on = load_harness(args.train_harness).name
    print(f"\n## Dev pass@1 of `{args.model}`{built}; trained under {trained_on}\n")
    print(f"{len(dev)} dev tasks x {args.samples} sample(s), seed {args.seed}, each harness's own decoding\n")
    print("| harness | trained on it | dev pass@1 | 95% CI | mean reward | format errors / turn | mean turns | "
          "eval s |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for path in sorted((REPO / "harnesses").glob("*.yaml")):
        harness = load_harness(path)
        start = time.perf_counter()
        s = evaluate(dev, harness, policy, samples=args.samples, seed=args.seed).overall
        print(f"| {harness.name} | {'yes' if harness.name == trained_on else 'no'} | {s.pass_at_1:.3f} | "
              f"[{s.ci_low:.3f}, {s.ci_high:.3f}] | {s.mean_reward:.3f} | {s.format_error_rate:.3f} | "
              f"{s.mean_turns:.2f} | {time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
