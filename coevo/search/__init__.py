"""`coevo search`: co-evolution of harness and weights. An Optuna study searches harnesses on dev (h-phases),
TRL GRPO trains weights on train under the accepted harness (w-phases), MLflow tracks every pair, and the
best pair is exported as one bundle.

    space.py        search_spaces/*.yaml -> SearchSpace (dotted harness paths, train.* GRPO options, `when`)
    space_check.py  the checks run on a whole space file before any trial
    config.py       the search config and the plan its one `budget` dial sets
    schedule.py     "w0 -> h -> w -> h" -> phases
    run.py          Search: run folder, stores, state, the walk over the schedule, `--join` workers
    state.py        state.json: finished phases and steps, checkpoints, incumbent, pool, test table
    phases.py       w0 (warm start), h (Optuna harness phase), the incumbent's acceptance test
    weights.py      w (GRPO, optionally a study over train.* keys; then top-k harnesses re-scored)
    scoring.py      dev/test subsets, batched scoring with pruning, the objective
    study.py        Optuna storage (heartbeats, retries), samplers, pruner, `optimize_until`
    final.py        the held-out four-row test table
    tracking.py     MLflow: parent / phase / trial runs, params, metrics, artifacts
    plots.py        optimization history, parameter importances, capability per generation
    report.py       `coevo compare`
    export.py       `coevo export` bundles and `load_bundle`
    synthetic.py    a harness-sensitive oracle policy, to measure the optimizer itself (tests, benchmark)
    cli.py          the commands: search, ui, compare, export
"""
