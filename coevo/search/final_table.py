"""The final table as text: the rows on the in-distribution test, the 2x2 with its effects, the held-out
block, the ratchet log, the budgets and the verdict. Pure formatting of what coevo/search/final.py
computed, so that `coevo compare`, the benchmark and the tests read the same words."""

from __future__ import annotations

from coevo.search.state import RunState, Summary, Verdict

H_STAR_M0, H0_M_STAR = "final harness on g0", "base harness on the final checkpoint"
"""The 2x2's two cells that are not rows of their own (H* x M0 and H0 x M*); MLflow names allow no '*'."""


def markdown(state: RunState, inputs) -> str:
    objective = "pass@1" if inputs.config.objective == "pass_at_1" else "reward"
    lines = [(f"In-distribution test ({len(inputs.test)} tasks; {inputs.origin.get('test', 'test split')}): "
             f"pass@1 with its 95% bootstrap interval; gain over the baseline in the search objective "
             f"({objective}), paired over the same tasks."), "",
             f"| pair | harness | checkpoint | pass@1 [95% CI] | {objective} | gain vs baseline [95% CI] | turns |",
             "|---|---|---|---|---|---|---|"]
    for row, r in state.test.items():
        harness = "base" if not r.overrides else f"{r.source} ({len(r.overrides)} fields)"
        gain = "—" if row == "baseline" else f"{r.gain:+.3f} [{r.gain_low:+.3f}, {r.gain_high:+.3f}]"
        lines.append(f"| {row} | {harness} | g{r.generation} | {_ci(r)} | {r.score:.3f} | {gain} | "
                     f"{r.mean_turns:.1f} |")
    lines += ["", *two_by_two_lines(state, objective), *held_out_lines(state, inputs), *ratchet_lines(state),
              *feedback_lines(state), *budget_lines(state), "", verdict(state.verdict, objective)]
    lines += [f"Warning: {w}." for w in state.verdict.warnings]
    return "\n".join(lines) + "\n"


def two_by_two_lines(state: RunState, objective: str) -> list[str]:
    t, e = state.test, state.verdict.effects
    cell = lambda row: f"{t[row].score:.3f}"
    triple = lambda name: f"{e[name][0]:+.3f} [{e[name][1]:+.3f}, {e[name][2]:+.3f}]"
    return [f"2x2 on the same test tasks ({objective}):", "",
            "| | generation 0 (M0) | final checkpoint (M*) |", "|---|---|---|",
            f"| base harness (H0) | {cell('baseline')} | {cell(H0_M_STAR)} |",
            f"| final harness (H*) | {cell(H_STAR_M0)} | {cell('co-evolved')} |", "",
            (f"Harness effect ΔH {triple('delta_h')}; model effect ΔM {triple('delta_m')}; "
             f"interaction I {triple('interaction')} (I > 0: the levers add more together than apart)."), ""]


def held_out_lines(state: RunState, inputs) -> list[str]:
    if not inputs.held_out:
        return []
    lines = [f"Held-out families, reported apart ({len(inputs.held_out)} tasks; {inputs.origin.get('held_out', '')}):",
             "", "| pair | pass@1 [95% CI] | reward |", "|---|---|---|"]
    lines += [f"| {row} | {_ci(r.held_out)} | {r.held_out.mean_reward:.3f} |"
              for row, r in state.test.items() if r.held_out]
    return [*lines, ""]


def ratchet_lines(state: RunState) -> list[str]:
    decisions = [h for h in state.history if h.phase != "start"]
    if not decisions:
        return []
    lines = ["Ratchet log (each candidate against the incumbent on the promotion tasks):", "",
             "| phase | candidate | wins | losses | ties | gain [95% CI] | decision |", "|---|---|---|---|---|---|---|"]
    for h in decisions:
        what = "accepted" if h.accepted else ("rejected" + (f": {h.error}" if h.error else ""))
        lines.append(f"| {h.phase} | {h.challenger} | {h.wins} | {h.losses} | {h.ties} | "
                     f"{h.gain:+.3f} [{h.gain_low:+.3f}, {h.gain_high:+.3f}] | {what} |")
    return [*lines, ""]


def feedback_lines(state: RunState) -> list[str]:
    """What drove each phase: the incumbent's failure clusters and the focus of each h-phase, the
    dimensions that mattered (Optuna's importances), and what each w-phase trained on and retired."""
    from coevo.search.failures import CAUSES

    lines = []
    if state.failures:
        lines += ["Failures of the incumbent on the evolve set, by cause, at the start of each h-phase:", "",
                  f"| phase | {' | '.join(CAUSES)} | focus |", "|---|" + "---|" * (len(CAUSES) + 1)]
        lines += [f"| {phase} | {' | '.join(str(f.failures.get(c, 0)) for c in CAUSES)} | "
                  f"{f.focus or '—'} ({f.trials} trials) |" for phase, f in state.failures.items()]
        lines.append("")
    for phase, importances in state.importances.items():
        top = ", ".join(f"{k} {v:.2f}" for k, v in list(importances.items())[:4])
        lines.append(f"Parameter importances in {phase}: {top}.")
    for r in state.curriculum:
        lines.append(f"Curriculum after {r['phase']}: retired {len(r['retired'])} solved evolve task(s), added "
                     f"{len(r['added'])} fresh instance(s).")
    for phase, trained in state.trained.items():
        lines.append(f"Weights in {phase}: {trained}.")
    return [*lines, ""] if lines else []


def budget_lines(state: RunState) -> list[str]:
    lines = [f"Fair arm {arm}: {b.budget} {b.unit} (the co-evolved run's budget), {b.wall_seconds / 60:.1f} min."
             for arm, b in state.budgets.items()]
    if state.timings:
        lines.append("Wall time per phase: " + ", ".join(f"{p} {s / 60:.1f} min" for p, s in state.timings.items())
                     + ".")
    return lines


def verdict(v: Verdict, objective: str) -> str:
    """One sentence: co-evolved against each fair arm (paired, same tasks), and whether both clear zero."""
    if not v.versus:
        return "No verdict: the fair single-lever arms did not run."
    versus = "; ".join(f"vs {arm} {g.gain:+.3f} [{g.low:+.3f}, {g.high:+.3f}] ({g.wins} wins, {g.losses} losses)"
                       for arm, g in v.versus.items())
    if v.beats_both_arms:
        return f"Co-evolved beats both fair single-lever arms beyond the paired 95% interval ({objective}: {versus})."
    return f"Co-evolved does not beat both fair single-lever arms beyond the paired 95% interval ({objective}: {versus})."


def _ci(r: Summary) -> str:
    return f"{r.pass_at_1:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]"
