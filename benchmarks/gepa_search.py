"""GEPA writing the system template vs Optuna choosing among fixed ones, on the scripted setting of
tests/gepa_world.py. Prints one markdown table (medians over seeds).

The setting: tasks whose verifier checks two things (reward.json), a scripted policy behind a real
OpenAI-compatible endpoint that does each only when its system prompt says so in those words, and a
scripted reflection LM behind another endpoint that adds one sentence per failed check it reads in the
feedback. Every score is real episodes in real sandboxes on the evolve tasks (mean partial credit).

- GEPA: `run_gepa` of the h-phase hook (the adapter over coevo rollouts), from mini_bash's system
  template, budget in episodes; it stops at a perfect evolve score.
- Optuna (TPE, the h-phase's sampler) over a fixed pool of templates: the five system templates that ship
  in prompts/, and the same five plus two hand-written ones (one holding the first sentence, one both).
  A trial is one template scored on every evolve task.

"Episodes to best": evolve episodes spent when the method first had its best score, counting the
evaluation that measured it. "Wall per candidate": seconds per proposal (GEPA: reflection + minibatch
evaluations, rejected proposals included) or per trial (Optuna).

    .venv/bin/python benchmarks/gepa_search.py [--seeds 3] [--evolve 6] [--budget 60] [--trials 12]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Not named gepa.py: with this folder first on sys.path, `import gepa` (dspy's) would import this file.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gepa_world import (  # the scripted world lives with the tests
    CHECKS,
    ChatEndpoint,
    phrase_policy,
    scripted_reflection,
    write_config,
    write_tasks,
)

HAND_WRITTEN = {"bench/system_first.j2": [CHECKS[0]], "bench/system_both.j2": list(CHECKS)}


def search_context(folder: Path, tasks: Path, urls: tuple[str, str], seed: int, args):
    from coevo.search.config import load_config
    from coevo.search.run import Search

    path = write_config(folder, tasks, *urls, budget=args.budget, seed=seed, name=f"bench-{seed}",
                        plan={"trials": 1, "dev_tasks": args.evolve, "batches": 1})
    return Search(load_config(path), log=lambda line: None).ctx


def gepa_arm(ctx) -> dict:
    from coevo.search.instructions.evolve import run_gepa
    from coevo.search.state import Pair

    param = ctx.inputs.space.params[0]
    run_id = ctx.tracker.start("benchmark gepa")
    start = Pair(checkpoint="unused: the policy is an endpoint", generation=0, source="benchmark")
    summary = run_gepa(ctx, param, "bench", run_id, start, ctx.run_dir / "gepa" / "bench-system")
    best = max(summary["candidates"], key=lambda c: (c["score"], -c["found_after"]), default=None)
    proposals = len(summary["candidates"]) + len(summary["rejected"])
    return {"best": best["score"] if best else summary["seed_score"],
            # GEPA stops at a perfect score, so then all it spent was spent reaching it; otherwise the episodes
            # when the best was proposed, plus its evaluation on the evolve tasks (fewer when GEPA's cache
            # already held some: an upper bound)
            "to_best": summary["metric_calls"] if best and best["score"] >= 1.0
            else (best["found_after"] if best else 0) + len(ctx.inputs.dev),
            "spent": summary["metric_calls"], "proposals": proposals,
            "per_candidate": summary["seconds"] / max(1, proposals)}


def optuna_arm(ctx, pool: list[str], seed: int, trials: int) -> dict:
    import optuna

    from coevo.policy import make_policy
    from coevo.search.scoring import objective_of, score
    from coevo.search.study import make_sampler

    config, evolve = ctx.inputs.config, ctx.inputs.dev
    study = optuna.create_study(direction="maximize", sampler=make_sampler("tpe", seed, trials))
    policy = make_policy(config.policy)
    best, to_best, spent, started = -1.0, 0, 0, time.monotonic()
    for _ in range(trials):
        trial = study.ask()
        harness = ctx.inputs.scoring_harness({"templates.system": trial.suggest_categorical("templates.system", pool)})
        value, _ = objective_of(score([evolve], harness, policy, 1, config.seed, config.sandbox,
                                      objective=config.objective), config.objective)
        study.tell(trial, value)
        spent += len(evolve)
        if value > best:
            best, to_best = value, spent
        if best >= 1.0:
            break
    return {"best": best, "to_best": to_best, "spent": spent, "proposals": len(study.trials),
            "per_candidate": (time.monotonic() - started) / len(study.trials)}


def write_hand_written(prompts: Path) -> None:
    base = (prompts / "system_bash.j2").read_text()
    for name, sentences in HAND_WRITTEN.items():
        (prompts / name).parent.mkdir(parents=True, exist_ok=True)
        (prompts / name).write_text(base + "".join(f"\nAlways {s}." for s in sentences))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--evolve", type=int, default=6, help="evolve tasks")
    parser.add_argument("--budget", type=int, default=60, help="GEPA's budget in episodes")
    parser.add_argument("--trials", type=int, default=12, help="Optuna's most trials")
    args = parser.parse_args()
    shipped = sorted(p.name for p in (ROOT / "prompts").glob("system_*.j2"))
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="coevo-bench-gepa-") as tmp, ChatEndpoint(phrase_policy) as policy, \
            ChatEndpoint(scripted_reflection) as reflection:
        tasks = write_tasks(Path(tmp) / "tasks", {"train": 1, "dev": 2 * args.evolve, "test": 1})
        for seed in range(args.seeds):
            folder = Path(tmp) / f"seed{seed}"
            folder.mkdir()
            ctx = search_context(folder, tasks, (policy.url, reflection.url), seed, args)
            write_hand_written(ctx.inputs.base.prompts_path)
            arms = {f"GEPA, budget {args.budget} episodes (from system_bash.j2)": gepa_arm(ctx),
                    f"Optuna TPE over the {len(shipped)} shipped templates":
                        optuna_arm(ctx, shipped, seed, args.trials),
                    f"Optuna TPE over the {len(shipped)} shipped + 2 hand-written (one holds both sentences)":
                        optuna_arm(ctx, shipped + list(HAND_WRITTEN), seed, args.trials)}
            for name, result in arms.items():
                rows.setdefault(name, []).append(result)
                print(f"seed {seed}: {name}: {result}", file=sys.stderr)
    print(f"\n{args.seeds} seeds, {args.evolve} evolve tasks; medians.\n")
    print("| method | best evolve score | episodes to best | episodes spent | candidates | wall per candidate (s) |")
    print("|---|---|---|---|---|---|")
    for name, results in rows.items():
        med = {k: statistics.median(r[k] for r in results) for k in results[0]}
        print(f"| {name} | {med['best']:.3f} | {med['to_best']:.0f} | {med['spent']:.0f} | {med['proposals']:.0f} "
              f"| {med['per_candidate']:.2f} |")


if __name__ == "__main__":
    from coevo import logs

    logs.setup()  # the search's and the trainers' progress lines, as `coevo` shows them
    main()
