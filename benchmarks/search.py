"""How well the harness search spends its evaluations. Prints two markdown tables:

1. pruning vs no pruning: episodes evaluated, best dev pass@1 found, and whether both find the same best
   harness (same sampler seed, same trials budget);
2. TPE (multivariate) vs random sampling on the default space: best after N trials and trials-to-best.

Policy: the synthetic harness-sensitive oracle (coevo/policy/synthetic.py), NOT a model. It replays each
task's reference solution, but replies come out unparseable with a probability set by the harness
(action format, templates, decoding, context, limits), and the real harness recovery, real sandboxes and
real verifiers decide each episode. That gives the optimizer a landscape with known structure at the cost
of shell commands, so the comparison is about the optimizer. Each trial runs the h-phase's own pieces
(space.suggest, make_sampler, make_pruner, scoring.score with Optuna pruning, sqlite RDB storage with
heartbeats); MLflow logging is left out.

    .venv/bin/python benchmarks/search.py [--tasks tasks] [--trials 16] [--seeds 3] [--dev 24]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def run_study(space, base, dev_batches, trials: int, sampler: str, pruning: bool, seed: int, storage: str) -> dict:
    import optuna

    from coevo.policy.synthetic import HarnessSensitivePolicy
    from coevo.search.scoring import Pruned, score
    from coevo.search.study import make_pruner, make_sampler, open_study, optimize_until

    name = f"{sampler}-{'prune' if pruning else 'full'}-{seed}"
    study = open_study(storage, name, make_sampler(sampler, seed, trials), make_pruner(pruning, len(dev_batches)))
    tasks = [t for b in dev_batches for t in b]

    def objective(trial):
        values = space.suggest(trial, space.harness_params)
        harness = base.with_overrides(values)
        try:
            report = score(dev_batches, harness, HarnessSensitivePolicy(harness, tasks, seed=0), 1, 0, trial=trial)
        except Pruned as p:
            trial.set_user_attr("episodes", p.partial.overall.episodes)
            raise optuna.TrialPruned() from None
        trial.set_user_attr("episodes", report.overall.episodes)
        return report.overall.pass_at_1

    t0 = time.perf_counter()
    optimize_until(study, trials, objective, grace_period=10, wait_for_stale=False)
    ordered = sorted(study.trials, key=lambda t: t.number)
    curve, best = [], 0.0
    for t in ordered:
        if t.state.name == "COMPLETE":
            best = max(best, t.value)
        curve.append(best)
    complete = [t for t in ordered if t.state.name == "COMPLETE"]
    top = max(complete, key=lambda t: (t.value, -t.number))
    return {"episodes": sum(t.user_attrs.get("episodes", 0) for t in ordered), "best": top.value,
            "best_params": space.resolve(top.params), "curve": curve, "seconds": time.perf_counter() - t0,
            "pruned": sum(t.state.name == "PRUNED" for t in ordered)}


def trials_to(curve: list[float], level: float) -> int | None:
    return next((i + 1 for i, v in enumerate(curve) if v >= level - 1e-9), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=Path, default=ROOT / "tasks")
    ap.add_argument("--harness", type=Path, default=ROOT / "harnesses" / "terminus_json.yaml")
    ap.add_argument("--space", type=Path, default=ROOT / "search_spaces" / "default.yaml")
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--dev", type=int, default=24, help="dev tasks per trial (family-stratified)")
    ap.add_argument("--batches", type=int, default=4)
    args = ap.parse_args()

    from coevo.harness import load_harness
    from coevo.search.scoring import batches, stratified
    from coevo.search.space_check import load_space
    from coevo.search.study import make_storage
    from coevo.tasks import load_taskset

    base = load_harness(args.harness)
    space = load_space(args.space, base)
    dev = stratified(load_taskset(args.tasks).split("dev"), args.dev, 0)
    dev_batches = batches(dev, args.batches, 0)
    with tempfile.TemporaryDirectory() as tmp:
        storage = make_storage(f"sqlite:///{tmp}/bench.db", heartbeat_interval=5, grace_period=15)
        runs = {(s, p, seed): run_study(space, base, dev_batches, args.trials, s, p, seed, storage)
                for seed in range(args.seeds) for s, p in (("tpe", True), ("tpe", False), ("random", False))}
    print(f"\nSynthetic harness-sensitive oracle policy; {len(dev)} dev tasks in {len(dev_batches)} batches, "
          f"{args.trials} trials per study, seeds 0..{args.seeds - 1}; default space ({len(space.params)} keys).\n")
    print("### Pruning (MedianPruner on partial dev batches) vs no pruning, TPE\n")
    print("| seed | episodes (pruned) | episodes (full) | saved | pruned trials | best pass@1 (pruned) | "
          "best pass@1 (full) | same best harness |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in range(args.seeds):
        a, b = runs[("tpe", True, seed)], runs[("tpe", False, seed)]
        same = "yes" if a["best_params"] == b["best_params"] else (
            "same score" if a["best"] == b["best"] else "no")
        print(f"| {seed} | {a['episodes']} | {b['episodes']} | {1 - a['episodes'] / b['episodes']:.0%} | "
              f"{a['pruned']}/{args.trials} | {a['best']:.3f} | {b['best']:.3f} | {same} |")
    print("\n### TPE (multivariate, grouped) vs random sampling, no pruning\n")
    print("| seed | best after N (TPE) | best after N (random) | trials to 0.80 (TPE) | trials to 0.80 (random) | "
          "trials to own best (TPE) | trials to own best (random) |")
    print("|---|---|---|---|---|---|---|")
    for seed in range(args.seeds):
        t, r = runs[("tpe", False, seed)], runs[("random", False, seed)]
        print(f"| {seed} | {t['best']:.3f} | {r['best']:.3f} | {trials_to(t['curve'], 0.8) or '—'} | "
              f"{trials_to(r['curve'], 0.8) or '—'} | {trials_to(t['curve'], t['best'])} | "
              f"{trials_to(r['curve'], r['best'])} |")
    for kind in ("tpe", "random"):
        vals = [runs[(kind, False, s)]["best"] for s in range(args.seeds)]
        print(f"\n{kind}: median best after {args.trials} trials {statistics.median(vals):.3f}", end="")
    secs = sum(r["seconds"] for r in runs.values())
    print(f"\n\nwall time of all studies: {secs:.0f}s")


if __name__ == "__main__":
    main()
