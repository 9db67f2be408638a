"""`coevo search`: co-evolution of harness and weights. An Optuna study searches harnesses on dev (h-phases),
TRL GRPO trains weights on train under the accepted harness (w-phases), MLflow tracks every pair, and the
best pair is exported as one bundle.

    space.py     search_spaces/*.yaml -> SearchSpace (dotted harness paths, train.* GRPO options, `when`)
    config.py    the search config and the plan its one `budget` dial sets
    schedule.py  "w0 -> h -> w -> h" -> phases
    run.py       Search: run folder, stores, state, the walk over the schedule
    phases.py    w0 (warm start), h (Optuna harness phase), the incumbent's acceptance test
    weights.py   w (GRPO, then top-k harnesses re-scored on the new checkpoint)
    scoring.py   dev/test subsets and batched scoring with pruning
    study.py     Optuna storage (heartbeats, retries), samplers, pruner
    final.py     the held-out four-row test table
    tracking.py  MLflow: parent / phase / trial runs, params, metrics, artifacts
    plots.py     optimization history, parameter importances, capability per generation
    report.py    `coevo compare`
    export.py    `coevo export` bundles and `load_bundle`
    cli.py       the commands
"""
