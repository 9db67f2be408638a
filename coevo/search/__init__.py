"""`coevo search`: co-evolution of harness and weights. An Optuna study searches harnesses on the evolve
set (h-phases), TRL GRPO trains weights under the accepted harness (w-phases), each candidate is promoted
or not on frozen promotion tasks, fair single-lever arms spend the same budgets, MLflow tracks every pair,
the final 2x2 table is scored on test tasks only, and the best pair is exported as one bundle.

    space.py          search_spaces/*.yaml -> SearchSpace (dotted harness paths, train.* GRPO options, `when`)
    space_check.py    the checks run on a whole space file before any trial
    config.py         the search config and the plan its one `budget` dial sets
    schedule.py       "w0 -> h -> w -> h" -> typed phases (kind w0, h, w or n, and name)
    splits.py         the three roles of tasks: evolve, promotion, test (drawn once into the run folder)
    inputs.py         Inputs: what a config resolves to (harness, space, plan, phases, task subsets)
    state.py          Pair, RunState and the Ledger that keeps state.json
    ratchet.py        Incumbent, Candidate and `accept`: promotion on the promotion tasks, one component at a time
    evaluator.py      Evaluator: one pair scored in its own MLflow run
    context.py        RunContext: the typed pieces a phase works with
    run.py            Search: builds the context, walks the schedule (the owner of a run)
    workers.py        scale-out: the owner lock, `--worker` and `--join` processes that share h-phases
    phases.py         generation 0, its baseline, and w0 (warm start)
    harness_phase.py  h (Optuna over harness keys, scored on dev)
    weights.py        w (GRPO, optionally a study over train.* keys; then top-k harnesses re-scored)
    nested.py         n (nested trials: each harness scored with a LoRA adapter trained under it)
    scoring.py        dev/test subsets, batched scoring with pruning, the objective
    study.py          Optuna storage (heartbeats, retries), samplers, pruner, `optimize_until`
    reconnect.py      the Optuna storage waits out a database restart
    stores.py         storage and tracking URLs: what is valid, the driver, passwords masked
    arms.py           the fair single-lever arms (harness-only, weights-only) with the run's budgets
    final.py          the final table: rows, the 2x2 and its interaction, the verdict (final_table.py: its text)
    tracking.py       MLflow: parent / phase / trial runs, params, metrics, artifacts, a run folder's store
    plots.py          optimization history, parameter importances, capability per generation, the 2x2
    report.py         `coevo compare`
    export.py         `coevo export`: the search's side of a bundle (coevo/bundle.py writes and reads it)
    preflight.py      `coevo check`
    cli.py            the commands: search, check, ui, compare, export
"""
