"""What the phases of a search work with: typed pieces, each the one home of its concern.

    inputs      what the config resolves to (harness, space, plan, phases, task subsets); fixed for the run
    ledger      state.json: finished phases and steps, checkpoints, pool, test table
    tracker     the MLflow store
    evaluator   scores a pair in its own MLflow run
    incumbent   the accepted pair, and the only way to replace it (coevo/search/ratchet.py)
    storage     the Optuna RDB storage, opened on first use

A phase is a function of a `RunContext`, its name and its MLflow run, so a second context (another
incumbent, another checkpoint) runs the same phase for another arm of an experiment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from coevo.search.evaluator import Evaluator
from coevo.search.inputs import Inputs
from coevo.search.ratchet import Incumbent
from coevo.search.schedule import kind_of
from coevo.search.state import Ledger
from coevo.search.tracking import Tracker


@dataclass
class RunContext:
    inputs: Inputs
    ledger: Ledger
    tracker: Tracker
    evaluator: Evaluator
    incumbent: Incumbent
    resume: bool
    """Resuming a killed run: an h-phase then waits for its killed trials to go stale and be retried."""
    log: Callable[[str], None]
    """The run's progress lines: the "coevo.search" logger at INFO (console and RUN/search.log), or what the
    caller gave `Search` (tests pass `lambda line: None`)."""

    @property
    def run_dir(self):
        return self.inputs.config.run_dir

    @cached_property
    def storage(self):
        from coevo.search.study import make_storage

        config = self.inputs.config
        url = config.storage or f"sqlite:///{(self.run_dir / 'optuna.db').resolve()}"
        return make_storage(url, config.heartbeat_interval, config.grace_period, on_stale=self.tracker.kill_trial)

    def phase_run(self, name: str) -> str:
        """The MLflow run of a phase: created once, reopened on resume."""
        state = self.ledger.state
        if name in state.phase_runs:
            self.tracker.reopen(state.phase_runs[name])
            return state.phase_runs[name]
        run_id = self.tracker.start(name, state.parent_run, {
            "phase": name, "kind": str(kind_of(name) or name), "generation": self.ledger.generation,
            "checkpoint": self.ledger.checkpoint or ""})
        state.phase_runs[name] = run_id
        self.ledger.save()
        return run_id


def find_checkpoint(ctx: RunContext, pair=None) -> None:
    """Point `pair` (default: the incumbent) at its checkpoint as this machine sees the run folder
    (state.json holds the owner's path)."""
    pair = pair or ctx.ledger.state.incumbent
    if pair is None or Path(pair.checkpoint).exists():
        return
    parts, name = Path(pair.checkpoint).parts, ctx.run_dir.name
    if name in parts:
        local = ctx.run_dir.joinpath(*parts[len(parts) - parts[::-1].index(name):])
        if local.exists():
            pair.checkpoint = str(local)
            return
    from coevo.search.errors import SearchError

    raise SearchError(f"{ctx.run_dir / 'state.json'}: the checkpoint {pair.checkpoint} ({pair.source}) is not "
                      "on this machine; put the run folder on a filesystem every worker mounts (and a `model:` "
                      "outside it at the same path on every machine)")
