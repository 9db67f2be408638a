"""A nested search SIGKILLed at seeded random points of every phase, for benchmarks/faults.py: the config
(`--config`, default search_spaces/quickstart_nested.yaml) runs once straight through, then once killed at least
MIN_KILLS times, each kill followed by `coevo search --resume`. The two final tables (rows, verdict, ratchet
decisions: tests/search_helpers.final_table) must be equal, and so must every study's finished trials.
Prints a table of its own: each kill and the phase it landed in, the wall times, and whether the final
tables and the trials are equal. tests/test_search_nested.py does the same on a small config."""

from __future__ import annotations

from fault_kit import Env, Row

FAULTS = []
MIN_KILLS = 6
KILL_SEED = 36
"""Seeds where in each phase the kills land (the search's own seed is the config's)."""
HOURS = 8 * 3600
"""Either run may take this long (the quickstart's warm start alone is about 12 minutes)."""


def fault(function):
    FAULTS.append(function)
    return function


def kill_plan(durations: dict[str, float], n: int = MIN_KILLS) -> list[str]:
    """Every phase the straight run went through once, then the longest ones again until there are `n`
    kills, in the order the run meets them."""
    phases = [p for p in durations if p not in ("all", "done")]
    plan, longest = list(phases), sorted(phases, key=durations.get, reverse=True)
    for i in range(max(0, n - len(phases))):
        plan.insert(plan.index(longest[i % len(longest)]), longest[i % len(longest)])
    return plan


def differences(straight: dict, killed: dict) -> list[str]:
    """Where two final tables (search_helpers.final_table) differ: rows, the verdict, ratchet decisions."""
    found = [f"row {r}" for r in sorted({*straight["rows"], *killed["rows"]})
             if straight["rows"].get(r) != killed["rows"].get(r)]
    found += ["verdict"] if straight["verdict"] != killed["verdict"] else []
    decisions = zip(straight["decisions"], killed["decisions"], strict=False)
    found += [f"decision {i} ({a['phase']})" for i, (a, b) in enumerate(decisions) if a != b]
    if len(straight["decisions"]) != len(killed["decisions"]):
        found.append(f"{len(straight['decisions'])} decisions straight, {len(killed['decisions'])} killed")
    return found


def report(config, durations: dict[str, float], run, differ: list[str], trials: list[str]) -> str:
    title = f"Nested search {config}, SIGKILLed at seeded random points (kill seed {KILL_SEED}), resumed after each:"
    kills = [f"| {i} | {k.target} | {k.phase} | {k.after_s:.1f} | {', '.join(k.running) or '-'} |"
             for i, k in enumerate(run.kills, 1)]
    landed = [k.phase for k in run.kills]
    equal = "yes" if not differ else f"NO: {', '.join(differ)}"
    same = "yes" if not trials else f"NO: {', '.join(trials)}"
    summary = (f"| {len(run.kills)} | {len(set(landed))}: {', '.join(landed)} | {durations['all']:.0f} | "
               f"{run.wall_s:.0f} | {equal} | {same} |")
    phases = ", ".join(f"{p} {s:.0f}" for p, s in durations.items() if p not in ("all", "done"))
    head = ("| kills | phases at the kills | wall straight (s) | wall killed + resumed (s) | final tables equal | "
            "trials equal |")
    return "\n".join([
        title, "", "| kill | aimed at | phase at the kill | s after it began | trials running |", "|---|---|---|---|---|",
        *kills, "", head, "|---|---|---|---|---|---|", summary, "", f"Straight run's phases (s): {phases}.", ""])


@fault
def nested_search_killed_and_resumed(env: Env) -> list[Row]:
    from search_helpers import final_table, finished_trials, killed_search, timed_search

    from coevo.search.config import load_config
    from coevo.search.state import load_state

    folder, name = env.folder("nested"), load_config(env.config).name
    runs = {kind: folder / kind / name for kind in ("straight", "killed")}
    durations = timed_search([str(env.config), "--runs-dir", str(folder / "straight")], runs["straight"],
                             folder / "straight.log", timeout=HOURS)
    plan = kill_plan(durations)
    run = killed_search([str(env.config), "--runs-dir", str(folder / "killed")], runs["killed"],
                        folder / "killed.log", plan, durations, KILL_SEED, timeout=HOURS)
    straight = final_table(load_state(runs["straight"] / "state.json"))
    killed = load_state(runs["killed"] / "state.json")
    finished = run.returncode == 0 and killed.done
    differ = differences(straight, final_table(killed)) if finished else ["the killed run did not finish"]
    # Each study's finished trials in order: equal tables can hide a resumed study that proposed other
    # harnesses, scored alike.
    studies = [finished_trials(runs[kind] / "optuna.db") for kind in ("straight", "killed")]
    trials = [s for s in sorted({*studies[0], *studies[1]}) if studies[0].get(s) != studies[1].get(s)]
    print(report(env.config, durations, run, differ, trials), flush=True)
    note = (f"{durations['all']:.0f} s straight, {run.wall_s:.0f} s killed and resumed; in flight at the kills: "
            + "; ".join(f"{k.phase}: {', '.join(k.running) or '-'}" for k in run.kills))
    return [Row(f"SIGKILL of a nested search {len(run.kills)} times at seeded random points",
                f"coevo search {env.config.name}, phases {', '.join(k.phase for k in run.kills)}, --resume after "
                "each", finished and not differ and not trials and len(run.kills) >= MIN_KILLS,
                "; ".join([*(["final table differs: " + ", ".join(differ)] if differ else []),
                           *(["trials differ: " + ", ".join(trials)] if trials else [])]) or "nothing", None, note)]
