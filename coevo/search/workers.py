"""Scale-out of the searched phases (h and n): one process owns the schedule, any number of workers
evaluate trials.

The protocol is the run folder and the Optuna storage, nothing else:
- The owner (`coevo search CONFIG`, or `--resume RUN`) holds `runs/<name>/owner.lock` (an flock) while it
  runs, so a second owner is refused. It alone writes state.json, ends the phases, and runs the w-phases,
  the ratchet, the arms and the final table.
- An h- or n-phase is open to workers once state.json records its MLflow run and its `seeded` step (an
  n-phase seeds no trial: the step only says that its start pair, GEPA's texts and its study are ready).
  Its study is `<name>.<phase>` in the run's storage (`storage:`, or the run folder's sqlite file).
- A worker (`coevo search CONFIG --worker`) waits for the run, then polls state.json. It joins each open
  phase with the owner's objective (`HarnessObjective`; in an n-phase `NestedObjective`, which trains its
  adapter in `adapters/<phase>-w<trial number>` from the phase's `start` pair) under `study.optimize`
  until the study holds the phase's budget of finished trials (Optuna's MaxTrialsCallback), then waits
  for the next one. It exits once no searched phase is left. Two workers started alike are two workers:
  harmless, each with its own sampler seed.
- The owner's phase ends when the budget is reached and no trial still runs. A killed process's trial
  stops beating, goes stale after `grace_period`, and is re-run with the same parameters by whoever asks
  for the next trial (RetryHeartbeatStaleTrialCallback in coevo/search/study.py).
- A worker finds the incumbent's (and an n-phase's start) checkpoint through state.json; when the owner's
  path to it does not exist on the worker's machine, it is looked up under the worker's own path to the
  run folder.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from coevo.search.context import RunContext, find_checkpoint
from coevo.search.errors import SearchError
from coevo.search.schedule import Kind, Phase
from coevo.search.state import Pair, RunState, load_state

POLL_SECONDS = 2.0
"""How often a waiting worker reads state.json."""
ME = f"{socket.gethostname()}:{os.getpid()}"
"""This process, as the `worker` user attr of its trials and in the owner lock."""


@contextmanager
def owner_lock(run_dir: Path) -> Iterator[None]:
    """Own the run's schedule for the block; a second owner is refused, naming the first. The kernel drops
    the lock when the process dies, however it dies."""
    import fcntl

    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / "owner.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise SearchError(f"{run_dir}: its schedule is owned by {holder}, which is running; add a worker "
                              "with `coevo search CONFIG --worker`, or stop that process first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def open_phase(state: RunState, phases: list[Phase]) -> str | None:
    """The h- or n-phase the owner runs now, once its study is ready for workers."""
    phase = phases[state.phases_done] if state.phases_done < len(phases) else None
    if (phase and phase.kind.searched and phase.name in state.phase_runs
            and state.step("seeded") is not None):
        return phase.name
    return None


def run_config(folder: Path, **overrides: Any):
    """The config a run folder holds (what the owner runs), followed when the folder was moved or is
    mounted elsewhere."""
    from coevo.search.config import load_config

    config = load_config(folder / "config.yaml", **overrides)
    if config.run_dir.resolve() != folder.resolve():
        config = config.model_copy(update={"runs_dir": folder.resolve().parent, "name": folder.name})
    return config


def run_worker(folder: Path, overrides: dict[str, Any], log: Callable[[str], None] | None = None) -> int:
    """`coevo search CONFIG --worker`: wait for the owner to start the run in `folder`, then evaluate trials
    of each of its h- and n-phases until none is left. Returns the number of trials this worker ran."""
    from coevo.search.run import Search

    log = log or logging.getLogger(__name__).info
    if not (folder / "state.json").is_file():
        log(f"worker {ME}: waiting for `coevo search` to start {folder}")
        while not (folder / "state.json").is_file():
            time.sleep(POLL_SECONDS)
    search = Search(run_config(folder, **overrides), resume=True, log=log)
    ctx, served, ran = search.ctx, set(), 0
    while True:
        ctx.ledger.state = state = load_state(ctx.ledger.path)
        if state.done or not any(p.kind.searched for p in ctx.inputs.schedule[state.phases_done:]):
            return ran
        name = open_phase(state, ctx.inputs.schedule)
        if name is None or name in served:
            time.sleep(POLL_SECONDS)
            continue
        log(f"worker {ME}: joining {name}")
        ran += join_phase(ctx, name)
        served.add(name)


def join_current(ctx: RunContext) -> int:
    """`coevo search --join RUN`: one more worker for the h- or n-phase the owner runs now, and only that
    one."""
    state = ctx.ledger.state
    name = open_phase(state, ctx.inputs.schedule)
    if name is None:
        following = ctx.inputs.phases[state.phases_done:] or ["the test table"]
        raise SearchError(f"{ctx.run_dir}: the search is not in a searched phase now (next: {following[0]}); "
                          "join while `coevo search` runs an h- or n-phase, or start `coevo search CONFIG --worker`, "
                          "which waits for each one")
    return join_phase(ctx, name)


def join_phase(ctx: RunContext, name: str) -> int:
    """Run trials of the owner's h- or n-phase `name` until its study holds the phase's budget."""
    from coevo.search.harness_phase import HarnessObjective
    from coevo.search.instructions.evolve import evolve_instructions
    from coevo.search.nested import NestedObjective
    from coevo.search.study import optimize_until, phase_study

    state, config, plan = ctx.ledger.state, ctx.inputs.config, ctx.inputs.plan
    run_id, kind = state.phase_runs[name], next(p.kind for p in ctx.inputs.schedule if p.name == name)
    find_checkpoint(ctx)
    start = Pair.model_validate(state.step("start").data["pair"]) if kind is Kind.N else None
    if start is not None:
        find_checkpoint(ctx, start)
    evolve_instructions(ctx, name, run_id, start)  # the choices of GEPA's texts, saved by the owner
    # A seed of its own: workers sharing the config's seed would propose the same first harnesses.
    study = phase_study(ctx, name, config.seed + zlib.crc32(ME.encode()), plan.trials)
    objective = (NestedObjective(ctx, name, run_id, study.study_name, start) if start is not None
                 else HarnessObjective(ctx, name, run_id, study.study_name))

    def signed(trial) -> float:
        trial.set_user_attr("worker", ME)
        return objective(trial)

    target = plan.trials + state.step("seeded").data["trials"]
    optimize_until(study, target, signed, config.grace_period, wait_for_stale=False)
    return objective.calls
