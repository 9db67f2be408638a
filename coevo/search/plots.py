"""PNG plots logged as MLflow artifacts: optimization history and parameter importances per h-phase
(Optuna's matplotlib plots), and capability per generation for the whole search. A plot that cannot be
drawn (too few trials for importances) is skipped with a note, never an error."""

from __future__ import annotations

import warnings


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    return plt


def log_study(tracker, run_id: str, study) -> None:
    import optuna
    from optuna.visualization import matplotlib as ovm

    plt = _pyplot()
    finished = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    plots = {"plots/optimization_history.png": ovm.plot_optimization_history,
             "plots/param_importances.png": ovm.plot_param_importances,
             "plots/intermediate_values.png": ovm.plot_intermediate_values}
    for path, draw in plots.items():
        if path.endswith("importances.png") and len(finished) < 3:
            tracker.text(run_id, f"skipped: {len(finished)} complete trials (3 needed)\n", path.replace(".png", ".txt"))
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = draw(study)
            figure = (ax.flat[0] if hasattr(ax, "flat") else ax).figure
            figure.set_size_inches(8, 5)
            tracker.figure(run_id, figure, path)
            plt.close(figure)
        except (ValueError, RuntimeError, ZeroDivisionError, IndexError) as e:
            tracker.text(run_id, f"skipped: {type(e).__name__}: {e}\n", path.replace(".png", ".txt"))


def log_capability(tracker, run_id: str, history: list[dict], test: dict[str, dict]) -> None:
    """Left: the incumbent's dev pass@1 (with CI) after each phase, by generation. Right: the test table."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    history = [h for h in history if not h["phase"].startswith("arm")]  # the arms are not the incumbent's
    xs = list(range(len(history)))
    ys = [h["pass_at_1"] for h in history]
    err = [[y - h["ci_low"] for y, h in zip(ys, history)], [h["ci_high"] - y for y, h in zip(ys, history)]]
    left.errorbar(xs, ys, yerr=err, marker="o", capsize=4, label="pass@1 (95% CI)")
    scores = [h.get("score", h["pass_at_1"]) for h in history]
    if scores != ys:
        left.plot(xs, scores, marker="s", linestyle="--", label="objective (partial credit)")
    left.legend(loc="upper left")
    left.set_xticks(xs, [f"{h['phase']}\ng{h['generation']}" + ("*" if h["accepted"] else "") for h in history])
    left.set_ylabel("evolve (dev) pass@1 of the incumbent")
    left.set_title("capability per generation (* = new pair accepted)")
    left.set_ylim(-0.02, 1.02)
    rows = list(test)
    vals = [test[r]["pass_at_1"] for r in rows]
    right.bar(rows, vals, yerr=[[v - test[r]["ci_low"] for v, r in zip(vals, rows)],
                                [test[r]["ci_high"] - v for v, r in zip(vals, rows)]], capsize=4)
    right.set_ylim(0, 1.02)
    right.set_title("test pass@1 (95% CI)")
    right.tick_params(axis="x", labelrotation=20)
    tracker.figure(run_id, fig, "plots/capability.png")
    plt.close(fig)


def log_two_by_two(tracker, run_id: str, test: dict, verdict) -> None:
    """The 2x2 as an interaction plot: one line per harness across the two checkpoints. Parallel lines
    mean the levers add; a steeper line for the final harness is a positive interaction."""
    from coevo.search.final_table import H0_M_STAR, H_STAR_M0

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for label, rows in (("base harness (H0)", ("baseline", H0_M_STAR)),
                        ("final harness (H*)", (H_STAR_M0, "co-evolved"))):
        ax.plot([0, 1], [test[r].score for r in rows], marker="o", label=label)
    ax.set_xticks([0, 1], ["generation 0 (M0)", "final checkpoint (M*)"])
    value, low, high = verdict.effects["interaction"]
    ax.set_title(f"test score, 2x2: interaction {value:+.3f} [{low:+.3f}, {high:+.3f}]")
    ax.set_ylabel("search objective on the test tasks")
    ax.legend()
    tracker.figure(run_id, fig, "plots/two_by_two.png")
    plt.close(fig)


def lever_of(history: list[dict]) -> list[str]:
    """Which lever each promotion decision moved: an h-phase's candidate is a harness; a w-phase's first is
    the new weights (under the incumbent's harness), any later one a harness on them; an n-phase's is a
    pair (a harness with the adapter trained under it); an arm its own."""
    from coevo.search.schedule import Kind, kind_of

    out, seen = [], set()
    for h in history:
        phase = h["phase"]
        if phase.startswith("arm"):
            out.append("weights" if "weights" in phase else "harness")
        elif kind_of(phase) is Kind.N:
            out.append("pair")
        elif kind_of(phase) is Kind.W:
            out.append("harness" if phase in seen else "weights")
        else:
            out.append("harness")
        seen.add(phase)
    return out


def draw_search(state, margin: float = 0.0, objective: str = "objective"):
    """The search in one figure: left, every promotion decision per phase, by lever (the candidate's paired
    gain over the incumbent on the promotion tasks, 95% interval; filled = accepted); right, the final 2x2
    on the test tasks (score per cell with its bootstrap interval, and the effects)."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    _draw_decisions(left, [h for h in state.history if h["phase"] != "start"], margin)
    if state.test and state.verdict:
        _draw_cells(right, state.test, state.verdict.effects, objective)
    else:
        right.text(0.5, 0.5, "no final table yet", ha="center", va="center", transform=right.transAxes)
        right.set_axis_off()
    fig.tight_layout()
    return fig


def _draw_decisions(ax, decisions: list[dict], margin: float) -> None:
    levers = lever_of(decisions)
    colors = {"harness": "tab:blue", "weights": "tab:orange", **({"pair": "tab:purple"} if "pair" in levers else {})}
    for i, (h, lever) in enumerate(zip(decisions, levers, strict=True)):
        ax.errorbar([i], [h["gain"]], yerr=[[h["gain"] - h["gain_low"]], [h["gain_high"] - h["gain"]]], fmt="o",
                    color=colors[lever], markersize=9, capsize=5, markerfacecolor=colors[lever] if h["accepted"]
                    else "white", markeredgewidth=2)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + 0.12 * (high - low))  # room for the arms' label
    arms = [i for i, h in enumerate(decisions) if h["phase"].startswith("arm")]
    if arms:
        ax.axvspan(min(arms) - 0.5, max(arms) + 0.5, color="0.92", zorder=0)
        ax.text((min(arms) + max(arms)) / 2, 0.98, "fair single-lever arms", ha="center", va="top", color="0.35",
                transform=ax.get_xaxis_transform())
    ax.axhline(0, color="0.4", linewidth=1)
    if margin:
        ax.axhline(margin, color="0.4", linewidth=1, linestyle="--", label=f"margin {margin:g}")
    ax.set_xticks(range(len(decisions)), [f"{h['phase'].removeprefix('arm ')}\n{_short(h['challenger'])}"
                                          for h in decisions], fontsize=8)
    ax.set_xlim(-0.6, max(len(decisions), 1) - 0.4)
    ax.set_ylabel("gain over the incumbent (promotion tasks)")
    ax.set_title("each lever per phase: candidate vs incumbent, paired 95% CI")
    handles = [ax.plot([], [], "o", color=c, markersize=9, label=f"{name} lever")[0] for name, c in colors.items()]
    handles.append(ax.plot([], [], "o", color="0.3", markerfacecolor="white", markeredgewidth=2, markersize=9,
                           label="rejected (filled: accepted)")[0])
    ax.legend(handles=handles, loc="lower left", fontsize=9)


def _draw_cells(ax, test: dict, effects: dict, objective: str) -> None:
    from coevo.evaluate.stats import bootstrap_ci
    from coevo.search.final_table import H0_M_STAR, H_STAR_M0

    cells = {("H0", "M0"): "baseline", ("H0", "M*"): H0_M_STAR, ("H*", "M0"): H_STAR_M0, ("H*", "M*"): "co-evolved"}
    width = 0.36
    for j, (harness, color) in enumerate((("H0", "tab:gray"), ("H*", "tab:green"))):
        for i, model in enumerate(("M0", "M*")):
            row = test[cells[harness, model]]
            low, high = bootstrap_ci(list(row.per_task.values()))
            x = i + (j - 0.5) * width
            ax.bar(x, row.score, width, color=color, label=f"{'base' if harness == 'H0' else 'final'} harness "
                   f"({harness})" if i == 0 else None)
            ax.errorbar([x], [row.score], yerr=[[row.score - low], [high - row.score]], color="black", capsize=5)
            ax.text(x, high + 0.02, f"{row.score:.3f}", ha="center", fontsize=9)
    ax.set_xticks([0, 1], ["generation 0 (M0)", "final checkpoint (M*)"])
    ax.set_ylim(0, 1.12)
    ax.set_ylabel(f"test {objective} (95% bootstrap CI)")
    n = len(test["baseline"].per_task)
    ax.set_title(f"final 2x2 on {n} test tasks")
    lines = [f"{label} {v:+.3f} [{lo:+.3f}, {hi:+.3f}]" for label, (v, lo, hi) in
             (("ΔH", effects["delta_h"]), ("ΔM", effects["delta_m"]), ("I", effects["interaction"]))]
    ax.text(0.02, 0.97, "\n".join(lines), transform=ax.transAxes, va="top", fontsize=9, family="monospace")
    ax.legend(loc="upper right", fontsize=9)


def _short(name: str, width: int = 14) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def log_search(tracker, run_id: str, state, run_dir, margin: float = 0.0, objective: str = "objective"):
    """plots/search.png in the run folder and as an artifact of the parent run; returns its path."""
    from pathlib import Path

    plt = _pyplot()
    path = Path(run_dir) / "plots" / "search.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = draw_search(state, margin, objective)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    tracker.file(run_id, path, "plots")
    return path
