"""Does co-evolution beat both fair single-lever arms? One search config run over several seeds: each
seed's final table (the fair arms, the 2x2 with its interaction, the ratchet log, the verdict), then a
summary across the seeds with the wall time of each phase.

    .venv/bin/python benchmarks/coevolution.py                       # the quickstart config, seeds 0 1 2
    .venv/bin/python benchmarks/coevolution.py --config C.yaml --seeds 0 1 2 3

Each seed is its own run folder under --runs-dir; a killed benchmark resumes the seeds it had started.
Seeds share the test draw (splits.test_seed), so their tables score the same test tasks.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from coevo.search.config import load_config
from coevo.search.final import ARMS
from coevo.search.final_table import markdown
from coevo.search.run import Search

ROOT = Path(__file__).resolve().parents[1]


def run_seed(config_path: Path, seed: int, runs_dir: Path, log) -> tuple[Search, float]:
    base = load_config(config_path)
    config = load_config(config_path, name=f"{base.name}-seed{seed}", seed=seed, runs_dir=runs_dir)
    resume = (config.run_dir / "state.json").exists()
    search = Search(config, resume=resume, log=log)
    started = time.monotonic()
    search.run()
    return search, time.monotonic() - started


def _triple(values) -> str:
    return "{:+.3f} [{:+.3f}, {:+.3f}]".format(*values)


def summary(rows: list[tuple[int, Search, float]]) -> str:
    lines = [("| seed | baseline | harness-only | weights-only | co-evolved | ΔH [95% CI] | ΔM [95% CI] | "
              "interaction [95% CI] | co-evolved vs harness-only | vs weights-only | beats both | minutes |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for seed, search, seconds in rows:
        state = search.ctx.ledger.state
        v, t = state.verdict, state.test
        effects = [_triple(v.effects[name]) for name in ("delta_h", "delta_m", "interaction")]
        versus = [_triple((g.gain, g.low, g.high)) for g in (v.versus[a] for a in ARMS)]
        scores = [f"{t[r].score:.3f}" for r in ("baseline", *ARMS, "co-evolved")]
        lines.append(f"| {seed} | {' | '.join(scores + effects + versus)} | "
                     f"{'yes' if v.beats_both_arms else 'no'} | {seconds / 60:.1f} |")
    wins = sum(s.ctx.ledger.state.verdict.beats_both_arms for _, s, _ in rows)
    lines += ["", f"Co-evolved beats both fair arms (paired 95% lower bounds above 0) on {wins} of {len(rows)} seeds."]
    phases = {p for _, s, _ in rows for p in s.ctx.ledger.state.timings}
    order = [p for p in rows[0][1].ctx.ledger.state.timings if p in phases]
    lines += ["", "| phase | median minutes | per seed |", "|---|---|---|"]
    for phase in order:
        values = [s.ctx.ledger.state.timings.get(phase, 0.0) / 60 for _, s, _ in rows]
        lines.append(f"| {phase} | {statistics.median(values):.1f} | {', '.join(f'{x:.1f}' for x in values)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "search_spaces" / "quickstart.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "bench-coevolution")
    parser.add_argument("--quiet", action="store_true", help="print only the tables, not the search's log")
    args = parser.parse_args()
    log = (lambda line: None) if args.quiet else print
    rows = []
    for seed in args.seeds:
        print(f"\n## seed {seed}\n", flush=True)
        search, seconds = run_seed(args.config, seed, args.runs_dir, log)
        print(markdown(search.ctx.ledger.state, search.ctx.inputs), flush=True)
        rows.append((seed, search, seconds))
    print(f"\n## Summary over seeds {' '.join(map(str, args.seeds))} ({args.config.name})\n")
    print(summary(rows))


if __name__ == "__main__":
    from coevo import logs

    logs.setup()  # the search's and the trainers' progress lines, as `coevo` shows them
    main()
