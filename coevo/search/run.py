"""`Search`: one co-evolution run. It builds the run's typed pieces (coevo/search/context.py), opens the
MLflow parent run and walks the schedule, one phase at a time. Workers that share its h-phases are in
coevo/search/workers.py.

    runs/<name>/
      config.yaml      the resolved config (what --resume reads back)
      search.log       every log line of the run (DEBUG and up, whatever -v/-q showed), workers' too
      state.json       finished phases and steps, checkpoints, incumbent, pool, arms, ratchet log, table
      splits.json      the task roles: sizes, origins, names; splits/ holds the drawn promotion and test tasks
      optuna.db        Optuna RDB storage (default; any SQLAlchemy URL works)
      mlflow.db        MLflow tracking store (default; any tracking URI works), artifacts in mlartifacts/
      model/           the tiny model, when the config names none
      checkpoints/     w0 (warm start), g1, g2, ... (GRPO phases), n1, ... (a nested phase's best pair, merged)
      adapters/        n1-t0, n1-t1, ...: each nested trial's LoRA adapter and the data it was trained on

Generation 0 and w0 live in coevo/search/phases.py, h in harness_phase.py, w in weights.py, n in nested.py,
the fair arms in arms.py, the final table in final.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from coevo import logs
from coevo.search import curriculum, final
from coevo.search.arms import fair_arms
from coevo.search.config import SearchConfig, dump_config
from coevo.search.context import RunContext
from coevo.search.errors import SearchError
from coevo.search.evaluator import Evaluator, PolicyFactory
from coevo.search.harness_phase import harness_phase
from coevo.search.inputs import load_inputs
from coevo.search.nested import nested_phase
from coevo.search.phases import ensure_start, warm_start
from coevo.search.ratchet import Incumbent
from coevo.search.schedule import Kind
from coevo.search.splits import Splits, save_splits
from coevo.search.state import Ledger, RunState
from coevo.search.tracking import Tracker, default_uri, flatten, is_local
from coevo.search.weights import weights_phase

PHASES = {Kind.W0: warm_start, Kind.H: harness_phase, Kind.W: weights_phase, Kind.N: nested_phase}
"""Phase kind -> the function that runs it: (RunContext, phase name, MLflow run id) -> None."""
LOG_FILE = "search.log"
log = logging.getLogger("coevo.search")


class Search:
    def __init__(self, config: SearchConfig, resume: bool = False, policy_factory: PolicyFactory | None = None,
                 log: Callable[[str], None] = log.info):
        """`log` takes the run's progress lines (default: the "coevo.search" logger at INFO)."""
        run_dir = config.run_dir
        if not resume and (run_dir / "state.json").exists():
            raise SearchError(f"{run_dir}: a search named '{config.name}' exists; resume it with "
                              f"`coevo search --resume {run_dir}`, or choose another name")
        inputs = load_inputs(config)
        run_dir.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(run_dir / "state.json")
        uri = config.tracking_uri or default_uri(run_dir)
        # A local store keeps its artifacts in the run folder; a tracking server chooses its own location.
        tracker = Tracker(uri, config.name, run_dir / "mlartifacts" if is_local(uri) else None)
        evaluator = Evaluator(inputs, tracker, policy_factory)
        incumbent = Incumbent(ledger, evaluator, inputs.promotion, config.seed, config.margin, log)
        self.ctx = RunContext(inputs, ledger, tracker, evaluator, incumbent, resume, log)
        curriculum.restore(self.ctx)
        self.current_phase_run: str | None = None

    def run(self) -> RunState:
        with logs.to_file(self.ctx.run_dir / LOG_FILE):
            return self._run()

    def _run(self) -> RunState:
        ctx, state = self.ctx, self.ctx.ledger.state
        phases = ctx.inputs.schedule
        self._open_parent()
        try:
            for i, phase in enumerate(phases):
                if i < state.phases_done:
                    continue
                ctx.log(f"== phase {phase.name} ({i + 1}/{len(phases)})")
                if phase.kind is not Kind.W0:
                    ensure_start(ctx)  # generation 0 and its baseline, before any h, w or n
                self._phase(phase.name, PHASES[phase.kind])
                state.phases_done, state.steps = i + 1, []
                ctx.ledger.save()
            ensure_start(ctx)
            if ctx.inputs.config.arms:
                self._phase("arms", fair_arms)
            self._phase("test", final.test_table)
            state.done = True
            ctx.ledger.save()
        except BaseException as e:
            status = "FAILED" if isinstance(e, Exception) else "KILLED"  # Ctrl-C is a kill, not a failure
            log.debug(f"the search stopped ({status})", exc_info=e)  # the traceback in the log file
            for run_id in (self.current_phase_run, state.parent_run):
                if run_id:
                    ctx.tracker.end(run_id, status)
            raise
        ctx.tracker.end(state.parent_run)
        return state

    def _phase(self, name: str, phase) -> None:
        """Run one phase in its MLflow run, timing it (a resumed phase adds to its earlier time)."""
        import time

        timings = self.ctx.ledger.state.timings
        started = time.monotonic()
        run_id = self.current_phase_run = self.ctx.phase_run(name)
        phase(self.ctx, name, run_id)
        timings[name] = round(timings.get(name, 0.0) + time.monotonic() - started, 1)
        self.ctx.tracker.metrics(run_id, {"wall_seconds": timings[name]})
        self.ctx.tracker.end(run_id)
        self.current_phase_run = None

    def _open_parent(self) -> None:
        ctx, state = self.ctx, self.ctx.ledger.state
        config, plan = ctx.inputs.config, ctx.inputs.plan
        (ctx.run_dir / "config.yaml").write_text(dump_config(config))
        (ctx.run_dir / "plan.json").write_text(plan.model_dump_json(indent=1))
        if ctx.resume:
            killed = ctx.tracker.kill_running()
            if killed:
                ctx.log(f"marked {len(killed)} MLflow run(s) left RUNNING as KILLED")
        if state.parent_run is None:
            state.parent_run = ctx.tracker.start(f"search {config.name}", tags={
                "phase": "search", "schedule": config.schedule, "budget": config.budget})
            params = flatten({"config": config.model_dump(mode="json"), "plan": plan.model_dump()})
            ctx.tracker.params(state.parent_run, params)
            ctx.tracker.params(state.parent_run, {
                **{f"tasks.{role}": n for role, n in ctx.inputs.sizes().items()},
                **{f"tasks.{role}.origin": text for role, text in ctx.inputs.origin.items()}})
            save_splits(Splits(ctx.inputs.dev, ctx.inputs.promotion, ctx.inputs.test, ctx.inputs.held_out,
                               ctx.inputs.origin), ctx.run_dir)
            ctx.ledger.save()
        else:
            ctx.tracker.reopen(state.parent_run)


def run_dir_of(target: str | Path, runs_dir: Path = Path("runs")) -> Path:
    """A run folder from its path or its name under `runs_dir`."""
    path = Path(target)
    for candidate in (path, runs_dir / path):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SearchError(f"{target}: not a search run folder (expected config.yaml and state.json in it, "
                      f"or a run name under {runs_dir}/)")

