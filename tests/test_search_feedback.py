"""Co-evolution's feedback paths, with the synthetic harness-sensitive policy in real sandboxes and real
Optuna and MLflow stores: the incumbent's failures focus the h-phase (clusters in MLflow, focus trials
enqueued first), parameter importances are logged, and the curriculum retires solved evolve tasks and
refills with fresh instances of their families, the same set again on resume."""

from __future__ import annotations

from search_helpers import write_config


def test_failures_focus_the_h_phase_and_importances_are_logged(suite, tmp_path):
    import optuna
    from mlflow import MlflowClient

    from coevo.search.config import load_config
    from coevo.search.run import Search

    config = load_config(write_config(tmp_path, suite, name="focus", arms=False))
    lines: list[str] = []
    state = Search(config, log=lines.append).run()

    baseline = state.baseline.failures
    assert sum(baseline.values()) > 0 and set(baseline) >= {"format_error", "no_submit", "wrong_output"}
    focus_line = next(line for line in lines if line.startswith("h1: incumbent (baseline)"))
    study = optuna.load_study(study_name="focus.h1", storage=f"sqlite:///{config.run_dir / 'optuna.db'}")
    focused = [t for t in study.trials if "focus" in t.user_attrs]
    assert focused and "trials enqueued" in focus_line
    assert all(t.number < len(focused) for t in focused)  # enqueued before Optuna samples its own
    assert focused[0].user_attrs["focus"] in focus_line
    assert set(state.importances["h1"]) <= {"templates.system", "action_format.kind", "limits.max_turns",
                                            "recovery.format_error_feedback", "recovery.max_format_retries"}
    assert abs(sum(state.importances["h1"].values()) - 1.0) < 1e-6
    # A trial keeps its evaluation's clusters and fingerprint (harness_phase.pair_of reads them back), so that
    # an incumbent promoted from a trial focuses the next h-phase: it once came out of the study with none.
    from coevo.search.failures import CAUSES

    for trial in (t for t in study.trials if t.state.name == "COMPLETE"):
        assert set(trial.user_attrs["failures"]) == set(CAUSES) and len(trial.user_attrs["fingerprint"]) == 16

    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    phase = client.get_run(state.phase_runs["h1"])
    assert phase.data.metrics["failures/wrong_output"] == baseline["wrong_output"]
    assert any(k.startswith("importance/") for k in phase.data.metrics)
    assert "failures.json" in {a.path for a in client.list_artifacts(phase.info.run_id)}


def test_curriculum_retires_solved_evolve_tasks_and_refills_from_their_families(suite, tmp_path):
    from coevo.search import curriculum
    from coevo.search.config import load_config
    from coevo.search.phases import ensure_start
    from coevo.search.run import Search

    config = load_config(write_config(tmp_path, suite, name="refresh", plan={"trials": 2, "dev_tasks": 12,
                                                                                "batches": 2}))
    search = Search(config, log=lambda line: None)
    ctx = search.ctx
    search._open_parent()
    ensure_start(ctx)
    before = curriculum.current(ctx)
    retiring = before[:3]  # as if the incumbent had solved them
    curriculum.refresh(ctx, "w1", ctx.ledger.state.parent_run, retiring)

    now = curriculum.current(ctx)
    record = ctx.ledger.state.curriculum[-1]
    assert len(now) == len(before) and not {t.name for t in retiring} & {t.name for t in now}
    added = [t for t in now if t.name in record["added"]]
    assert len(added) == 3 and sorted(t.family for t in added) == sorted(t.family for t in retiring)
    taken = {t.instruction for t in [*before, *ctx.inputs.promotion, *ctx.inputs.test, *ctx.inputs.train]}
    assert not taken & {t.instruction for t in added}  # fresh: no task of another role, nor a retired one
    assert sorted(t.name for b in ctx.evaluator.evolve_batches for t in b) == sorted(t.name for t in now)

    ctx.ledger.save()
    again = Search(config, resume=True, log=lambda line: None).ctx
    assert ([[t.name for t in b] for b in again.evaluator.evolve_batches]
            == [[t.name for t in b] for b in ctx.evaluator.evolve_batches])
