"""Optuna plumbing: RDB storage with heartbeats, the samplers and pruner, `phase_study` (where every study
of a search is opened), and `optimize_until`, which runs a study until it holds a target number of
finished trials, however many processes it took.

Why these choices (written against Optuna 5):
- heartbeats + RetryHeartbeatStaleTrialCallback: a trial whose process was killed (-9) stops beating;
  once stale it is marked FAIL and re-queued with the same parameters. Heartbeats only run inside
  `study.optimize`, so every trial goes through it (never ask/tell);
- the target counts COMPLETE and PRUNED trials across the whole study, so a resumed search or a second
  worker on the same storage contributes to one budget instead of restarting it;
- multivariate TPE with `group=True` models the conditional parameters of a space (a retry cap that only
  exists when format feedback is on) instead of treating them as independent.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
optuna.logging.set_verbosity(optuna.logging.WARNING)  # the search prints one line per trial itself
RETRIES = 3
"""How many times a killed trial is re-run before it stays FAIL."""


def make_storage(url: str, heartbeat_interval: int, grace_period: int,
                 on_stale: Callable[[str, int], None] | None = None) -> optuna.storages.RDBStorage:
    """Any SQLAlchemy URL (sqlite:///runs/x/optuna.db, postgresql://...), with heartbeats; a database
    server's restart is waited out (coevo/search/reconnect.py). `on_stale(study name, trial number)` is
    told of each trial found dead, in whichever process finds it."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    from coevo.search.reconnect import ReconnectingStorage
    from coevo.search.sqlite_wal import enable_wal
    from coevo.search.stores import engine_url

    enable_wal(url)
    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}

    def stale(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        retry(study, trial)
        if on_stale is not None:
            try:
                on_stale(study.study_name, trial.number)
            except Exception as e:  # noqa: BLE001 - bookkeeping of a dead trial never stops the live ones
                logging.getLogger(__name__).warning("trial %d of %s found dead; not recorded: %s", trial.number,
                                                    study.study_name, e)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = RetryHeartbeatStaleTrialCallback(max_retry=RETRIES)
        return ReconnectingStorage(engine_url(url), engine_kwargs=kwargs, heartbeat_interval=heartbeat_interval,
                                   grace_period=grace_period, heartbeat_stale_trial_callback=stale)


def make_sampler(kind: str, seed: int, trials: int) -> optuna.samplers.BaseSampler:
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # A third of the budget explores at random before TPE models the space (Optuna's default of 10
        # startup trials would leave a small budget entirely random).
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, constant_liar=True,
                                          n_startup_trials=max(2, trials // 3))


def make_pruner(enabled: bool, batches: int = 4, inner: bool = False) -> optuna.pruners.BasePruner:
    if not enabled:
        return optuna.pruners.NopPruner()
    # Prune a trial whose objective after a dev batch is below the median of earlier trials at that batch.
    # With 3+ batches the first is never a pruning point: one small batch is too noisy to judge by. A nested
    # trial's step 0 (`inner`: its SFT adapter on the first batch) is one, because what it saves is the
    # trial's GRPO steps, each worth several batches.
    return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1 if batches >= 3 and not inner else 0)


def open_study(storage, name: str, sampler, pruner) -> optuna.Study:
    return optuna.create_study(storage=storage, study_name=name, direction="maximize", sampler=sampler,
                               pruner=pruner, load_if_exists=True)


def phase_study(ctx, phase: str, seed: int | None = None, trials: int = 0, prune: bool = True) -> optuna.Study:
    """The run's study of a phase, arm or training (`<config name>.<phase>` in its storage), created or
    reopened: the one place a search makes a study. `seed` seeds the config's sampler for a budget of
    `trials` (None: Optuna's default, for a study only read or one whose caller sets a sampler per trial);
    the pruner judges the evolve batches unless `prune` or the config's `pruning` is off."""
    config = ctx.inputs.config
    from coevo.search.schedule import Kind, kind_of

    sampler = None if seed is None else make_sampler(config.sampler, seed, trials)
    inner = kind_of(phase) is Kind.N and bool(ctx.inputs.plan.inner_grpo_steps)
    pruner = make_pruner(prune and config.pruning, len(ctx.inputs.dev_batches), inner)
    return open_study(ctx.storage, f"{config.name}.{phase}", sampler, pruner)


def finished(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


def optimize_until(study: optuna.Study, target: int, objective: Callable, grace_period: int,
                   wait_for_stale: bool = True, wait_for_running: bool = True) -> None:
    """Run trials until the study holds `target` finished ones.

    A trial left RUNNING by a killed process is retried once its heartbeat is stale; when resuming we
    wait (at most one grace period) for that to happen, so the retry comes first and the trial count
    stays exact.
    """
    from optuna.study import MaxTrialsCallback

    if wait_for_stale:
        wait_stale(study, grace_period)
    # Workers sharing the storage stop together once the study as a whole has `target` finished trials.
    stop = MaxTrialsCallback(target, states=FINISHED)
    while (left := target - finished(study)) > 0:
        study.optimize(objective, n_trials=left, catch=(), gc_after_trial=False, callbacks=[stop])
    if wait_for_running:
        wait_running(study, grace_period)


def wait_running(study: optuna.Study, grace_period: int) -> None:
    """Wait for trials other workers are still running (a dead worker's trial goes stale and fails)."""
    adopted: set[int] = set()
    while _fail_stale(study, adopted):
        time.sleep(min(2.0, grace_period / 2))


def wait_stale(study: optuna.Study, grace_period: int) -> None:
    # Two grace periods: a trial given its first heartbeat here (see _fail_stale) goes stale after one.
    deadline, adopted = time.monotonic() + 2 * grace_period + 2, set()
    while _fail_stale(study, adopted) and time.monotonic() < deadline:
        time.sleep(1.0)


def _fail_stale(study: optuna.Study, adopted: set[int]) -> bool:
    """Fail (and so retry) the RUNNING trials whose heartbeat is stale; whether any is still RUNNING.

    Optuna fails only trials whose heartbeat is old, so a trial whose worker was killed before its first
    heartbeat would stay RUNNING for ever (and the phase wait on it). Each RUNNING trial left after the
    check gets one heartbeat on its behalf, once: a live worker's own heartbeats go on over it, a dead
    one's goes stale after one grace period."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in running:
        if trial._trial_id not in adopted:
            study._storage.record_heartbeat(trial._trial_id)
            adopted.add(trial._trial_id)
    return bool(running)


def retried_from(trial) -> int | None:
    """The number of the original trial when this one re-runs a killed trial."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    frozen = next(t for t in trial.study.get_trials(deepcopy=False) if t.number == trial.number)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return RetryHeartbeatStaleTrialCallback.retried_trial_number(frozen)


def top_trials(study: optuna.Study, k: int) -> list[optuna.trial.FrozenTrial]:
    complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.value is not None]
    return sorted(complete, key=lambda t: (-t.value, t.number))[:k]


def run_trials(ctx, study: optuna.Study, target: int, objective, seed: int) -> None:
    """Trials until the study holds `target` finished ones, one at a time, each proposed by a sampler seeded
    with `seed` and the count finished before it (its slot): a resumed phase, whose killed trial is retried
    first with its parameters, then proposes the trials a straight run would have, in the same slots."""
    config, first = ctx.inputs.config, True
    while (done := finished(study)) < target:
        study.sampler = make_sampler(config.sampler, seed * 1009 + done, target)
        objective.slot = done
        # Not waiting for the workers' trials after each of ours: a worker starts its next one at once.
        optimize_until(study, done + 1, objective, config.grace_period, wait_for_stale=first and ctx.resume,
                       wait_for_running=False)
        first = False
    wait_running(study, config.grace_period)
