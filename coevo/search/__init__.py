"""`coevo search`: co-evolution of harness and weights. An Optuna study searches harnesses on dev (h-phases),
TRL GRPO trains weights on train under the accepted harness (w-phases), MLflow tracks every pair, and the
best pair is exported as one bundle.

    space.py          search_spaces/*.yaml -> SearchSpace (dotted harness paths, train.* GRPO options, `when`)
    space_check.py    the checks run on a whole space file before any trial
    config.py         the search config and the plan its one `budget` dial sets
    schedule.py       "w0 -> h -> w -> h" -> phases
    splits.py         the three roles of tasks: evolve, promotion, test (drawn once into the run folder)
    inputs.py         Inputs: what a config resolves to (harness, space, plan, phases, task subsets)
    state.py          Pair, RunState and the Ledger that keeps state.json
    ratchet.py        Incumbent, Candidate and `accept`: the only way the accepted pair changes
    evaluator.py      Evaluator: one pair scored in its own MLflow run
    context.py        RunContext: the typed pieces a phase works with
    run.py            Search: builds the context, walks the schedule, `--join` workers
    phases.py         generation 0, its baseline, and w0 (warm start)
    harness_phase.py  h (Optuna over harness keys, scored on dev)
    weights.py        w (GRPO, optionally a study over train.* keys; then top-k harnesses re-scored)
    scoring.py        dev/test subsets, batched scoring with pruning, the objective
    study.py          Optuna storage (heartbeats, retries), samplers, pruner, `optimize_until`
    final.py          the held-out four-row test table
    tracking.py       MLflow: parent / phase / trial runs, params, metrics, artifacts, a run folder's store
    plots.py          optimization history, parameter importances, capability per generation
    report.py         `coevo compare`
    export.py         `coevo export`: the search's side of a bundle (coevo/bundle.py writes and reads it)
    preflight.py      `coevo check`
    cli.py            the commands: search, check, ui, compare, export
"""
