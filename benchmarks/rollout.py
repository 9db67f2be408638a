"""Rollout throughput: 32 episodes lockstep-batched (one generate call per turn for all of them)
against the same 32 episodes one at a time, in one run, same model, harness, tasks and seed.

    .venv/bin/python benchmarks/rollout.py [--model DIR] [--harness harnesses/mini_bash.yaml] [--episodes 32]

Without --model a fresh tiny model is built (untrained: throughput does not depend on skill).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from coevo.harness import load_harness
from coevo.policy import make_policy
from coevo.rollout import rollout
from coevo.tasks import load_taskset

ROOT = Path(__file__).resolve().parent.parent


def measure(label: str, run) -> tuple[str, float, int, int]:
    start = time.perf_counter()
    trajectories = run()
    return label, time.perf_counter() - start, len(trajectories), sum(t.tokens for t in trajectories)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--harness", type=Path, default=ROOT / "harnesses" / "mini_bash.yaml")
    parser.add_argument("--tasks", type=Path, default=ROOT / "tasks")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.model is None:
        from coevo.train.model import build_tiny_model

        args.model = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny", args.tasks, seed=0)
    harness = load_harness(args.harness)
    tasks = load_taskset(args.tasks).split("dev")[: args.episodes]
    policy = make_policy({"backend": "hf", "model": str(args.model)})

    rows = [
        measure(f"lockstep ({len(tasks)} episodes, one batch)",
                lambda: rollout(tasks, harness, policy, seed=args.seed)),
        measure("one episode at a time",
                lambda: [t for task in tasks for t in rollout([task], harness, policy, seed=args.seed)]),
    ]
    print(f"| mode ({harness.name}, {args.model}) | episodes | wall s | episodes/min | generated tokens/s |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds, episodes, tokens in rows:
        print(f"| {label} | {episodes} | {seconds:.1f} | {episodes / seconds * 60:.1f} | {tokens / seconds:.0f} |")
    print(f"\nlockstep speed-up (episodes/min): {rows[1][1] / rows[0][1]:.2f}x")


if __name__ == "__main__":
    main()
