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


def log_two_by_two(tracker, run_id: str, test: dict[str, dict], verdict: dict) -> None:
    """The 2x2 as an interaction plot: one line per harness across the two checkpoints. Parallel lines
    mean the levers add; a steeper line for the final harness is a positive interaction."""
    from coevo.search.final_table import H0_M_STAR, H_STAR_M0

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for label, rows in (("base harness (H0)", ("baseline", H0_M_STAR)),
                        ("final harness (H*)", (H_STAR_M0, "co-evolved"))):
        ax.plot([0, 1], [test[r]["score"] for r in rows], marker="o", label=label)
    ax.set_xticks([0, 1], ["generation 0 (M0)", "final checkpoint (M*)"])
    value, low, high = verdict["effects"]["interaction"]
    ax.set_title(f"test score, 2x2: interaction {value:+.3f} [{low:+.3f}, {high:+.3f}]")
    ax.set_ylabel("search objective on the test tasks")
    ax.legend()
    tracker.figure(run_id, fig, "plots/two_by_two.png")
    plt.close(fig)
