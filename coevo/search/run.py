"""`Search`: one co-evolution run. It owns the run folder, the stores and the state, and walks the schedule.

    runs/<name>/
      config.yaml      the resolved config (what --resume reads back)
      state.json       finished phases and steps, checkpoints, incumbent, pool, test table
      optuna.db        Optuna RDB storage (default; any SQLAlchemy URL works)
      mlflow.db        MLflow tracking store (default; any tracking URI works), artifacts in mlartifacts/
      model/           the tiny model, when the config names none
      checkpoints/     w0 (warm start), g1, g2, ... (GRPO phases)

Phases live in coevo/search/phases.py, the final table in coevo/search/final.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from coevo.search.config import SearchConfig, dump_config, make_plan
from coevo.search.errors import SearchError
from coevo.search.schedule import parse_schedule
from coevo.search.scoring import Pruned, batches, objective_of, score, stratified
from coevo.search.state import Pair, RunState, Step, load_state, save_state
from coevo.search.tracking import Tracker, default_uri, flatten, is_local

PolicyFactory = Callable[[Any, str, list], Any]
"""(harness, checkpoint folder, tasks) -> Policy."""


class Search:
    def __init__(self, config: SearchConfig, resume: bool = False, policy_factory: PolicyFactory | None = None,
                 log: Callable[[str], None] = print):
        from coevo.harness import load_harness
        from coevo.search.space_check import load_space
        from coevo.tasks import load_taskset

        self.config, self.log, self.resume = config, log, resume
        self.run_dir = config.run_dir
        self.state_path = self.run_dir / "state.json"
        if not resume and self.state_path.exists():
            raise SearchError(f"{self.run_dir}: a search named '{config.name}' exists; resume it with "
                              f"`coevo search --resume {self.run_dir}`, or choose another name")
        self.phases = parse_schedule(config.schedule, "schedule")
        self.base = load_harness(config.harness)
        if config.overrides:
            self.base = self.base.with_overrides(config.overrides)
        self.space = load_space(config.space, self.base)
        taskset = load_taskset(config.tasks)
        splits = {s: taskset.split(s) for s in ("train", "dev", "test")}
        empty = [s for s, tasks in splits.items() if not tasks]
        if empty:
            raise SearchError(f"{config.tasks}: no tasks in split(s) {', '.join(empty)}; the search needs train, "
                              "dev and test (see manifest.json)")
        self.plan = make_plan(config, *(len(splits[s]) for s in ("train", "dev", "test")), len(self.space.train_params))
        self.train_tasks = stratified(splits["train"], self.plan.train_tasks, config.seed)
        self.dev = stratified(splits["dev"], self.plan.dev_tasks, config.seed)
        self.dev_batches = batches(self.dev, self.plan.batches, config.seed)
        self.test = stratified(splits["test"], self.plan.test_tasks, config.seed)
        self.policy_factory = policy_factory or self._default_policy
        self._policy_cache: tuple[str, Any] | None = None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.state = load_state(self.state_path)
        uri = config.tracking_uri or default_uri(self.run_dir)
        # A local store keeps its artifacts in the run folder; a tracking server chooses its own location.
        self.tracker = Tracker(uri, config.name, self.run_dir / "mlartifacts" if is_local(uri) else None)
        self._storage = None
        self.current_phase_run: str | None = None

    # -- the walk ----------------------------------------------------------------------------------
    def run(self) -> RunState:
        from coevo.search import final, phases

        self._open_parent()
        try:
            for i, name in enumerate(self.phases):
                if i < self.state.phases_done:
                    continue
                self.log(f"== phase {name} ({i + 1}/{len(self.phases)})")
                if name != "w0":
                    phases.ensure_start(self)  # generation 0 and its baseline, before any h or w
                run_id = self.current_phase_run = self.phase_run(name)
                {"w0": phases.warm_start, "h": phases.harness_phase, "w": phases.weights_phase}[
                    "w0" if name == "w0" else name[0]](self, name, run_id)
                self.tracker.end(run_id)
                self.current_phase_run = None
                self.state.phases_done, self.state.steps = i + 1, []
                self.save()
            phases.ensure_start(self)
            final.test_table(self)
            self.state.done = True
            self.save()
        except BaseException as e:
            status = "FAILED" if isinstance(e, Exception) else "KILLED"  # Ctrl-C is a kill, not a failure
            for run_id in (self.current_phase_run, self.state.parent_run):
                if run_id:
                    self.tracker.end(run_id, status)
            raise
        self.tracker.end(self.state.parent_run)
        return self.state

    def join(self) -> int:
        """Run trials of the h-phase the main `coevo search` process is in now, as one more worker on the
        same Optuna storage and MLflow store (scale-out: start this on other machines). Returns the
        number of trials this worker ran."""
        import os

        from coevo.search.phases import HarnessObjective
        from coevo.search.study import make_pruner, make_sampler, open_study, optimize_until

        i = self.state.phases_done
        name = self.phases[i] if i < len(self.phases) else "the test table"
        if not name.startswith("h") or name not in self.state.phase_runs or self.state.step("seeded") is None:
            raise SearchError(f"{self.run_dir}: the search is not in a harness phase now (next: {name}); join "
                              "while `coevo search` runs an h-phase")
        study_name = f"{self.config.name}.{name}"
        sampler = make_sampler(self.config.sampler, self.config.seed + os.getpid(), self.plan.trials)
        study = open_study(self.storage, study_name, sampler, make_pruner(self.config.pruning, len(self.dev_batches)))
        objective = HarnessObjective(self, name, self.state.phase_runs[name], study_name)
        target = self.plan.trials + self.state.step("seeded").data["trials"]
        optimize_until(study, target, objective, self.config.grace_period, wait_for_stale=False)
        return objective.calls

    def _open_parent(self) -> None:
        (self.run_dir / "config.yaml").write_text(dump_config(self.config))
        (self.run_dir / "plan.json").write_text(self.plan.model_dump_json(indent=1))
        if self.resume:
            killed = self.tracker.kill_running()
            if killed:
                self.log(f"marked {len(killed)} MLflow run(s) left RUNNING as KILLED")
        if self.state.parent_run is None:
            self.state.parent_run = self.tracker.start(f"search {self.config.name}", tags={
                "phase": "search", "schedule": self.config.schedule, "budget": self.config.budget})
            params = flatten({"config": self.config.model_dump(mode="json"), "plan": self.plan.model_dump()})
            self.tracker.params(self.state.parent_run, params)
            self.tracker.params(self.state.parent_run, {"tasks.dev": len(self.dev), "tasks.test": len(self.test),
                                                        "tasks.train": len(self.train_tasks)})
            self.save()
        else:
            self.tracker.reopen(self.state.parent_run)

    def phase_run(self, name: str) -> str:
        """The MLflow run of a phase: created once, reopened on resume."""
        if name in self.state.phase_runs:
            self.tracker.reopen(self.state.phase_runs[name])
            return self.state.phase_runs[name]
        run_id = self.tracker.start(name, self.state.parent_run, {
            "phase": name, "kind": name if name in ("w0", "test") else name[0], "generation": self.generation,
            "checkpoint": self.checkpoint or ""})
        self.state.phase_runs[name] = run_id
        self.save()
        return run_id

    # -- shared helpers ----------------------------------------------------------------------------
    def save(self) -> None:
        save_state(self.state_path, self.state)

    def done_step(self, key: str, **data: Any) -> Step:
        step = Step(key=key, data=data)
        self.state.steps.append(step)
        self.save()
        return step

    @property
    def generation(self) -> int:
        return max(0, len(self.state.checkpoints) - 1)

    @property
    def checkpoint(self) -> str | None:
        return self.state.checkpoints[-1] if self.state.checkpoints else None

    @property
    def storage(self):
        from coevo.search.study import make_storage

        if self._storage is None:
            url = self.config.storage or f"sqlite:///{(self.run_dir / 'optuna.db').resolve()}"
            self._storage = make_storage(url, self.config.heartbeat_interval, self.config.grace_period)
        return self._storage

    def harness(self, overrides: dict[str, Any]):
        return self.base.with_overrides(overrides) if overrides else self.base

    def policy(self, harness, checkpoint: str, tasks: list):
        return self.policy_factory(harness, checkpoint, tasks)

    def _default_policy(self, harness, checkpoint: str, tasks: list):
        from coevo.policy import make_policy

        spec = dict(self.config.policy or {})
        if spec.get("backend") == "oracle":
            return make_policy({**spec, "harness": harness, "tasks": tasks})
        if spec.get("backend") == "synthetic":  # the optimizer's test bench (coevo/search/synthetic.py)
            from coevo.search.synthetic import HarnessSensitivePolicy

            return HarnessSensitivePolicy(harness, tasks, seed=spec.get("seed", self.config.seed))
        if spec:
            return make_policy(spec)
        if self._policy_cache is None or self._policy_cache[0] != checkpoint:
            self._policy_cache = (checkpoint, make_policy({"backend": "hf", "model": checkpoint}))
        return self._policy_cache[1]

    def evaluate(self, name: str, parent: str, overrides: dict[str, Any], checkpoint: str, generation: int,
                 source: str, task_batches: list[list] | None = None, trial=None, tags: dict | None = None,
                 train: dict | None = None) -> tuple[Pair, Any]:
        """Score a pair (dev batches by default) in its own MLflow run; raises Pruned or the failure."""
        run_id = self.tracker.start(name, parent, {"phase": name.split()[0], "generation": generation,
                                                   "checkpoint": checkpoint, "source": source, **(tags or {})})
        try:
            harness = self.harness(overrides)
            params = {k: v for k, v in flatten(harness.model_dump(mode="json")).items()
                      if k not in ("name", "description", "prompts_dir")}
            self.tracker.params(run_id, {**params, **{f"train.{k}": v for k, v in (train or {}).items()}})
            task_batches = task_batches or self.dev_batches
            policy = self.policy(harness, checkpoint, [t for b in task_batches for t in b])
            report = score(task_batches, harness, policy, self.plan.samples, self.config.seed, self.config.sandbox,
                           trial=trial, objective=self.config.objective, on_batch=lambda i, v, n: self.tracker.metrics(
                               run_id, {f"partial_{self.config.objective}": v, "episodes_so_far": n}, step=i))
        except Pruned as p:
            self.tracker.tags(run_id, {"state": "PRUNED", "pruned_after_batch": p.step + 1})
            self.tracker.summary(run_id, p.partial)
            self.tracker.end(run_id)
            raise
        except Exception as e:
            self.tracker.tags(run_id, {"state": "FAIL", "error": f"{type(e).__name__}: {e}"})
            self.tracker.end(run_id, "FAILED")
            raise
        except BaseException:
            self.tracker.end(run_id, "KILLED")
            raise
        self.tracker.summary(run_id, report)
        self.tracker.evaluation(run_id, harness, report)
        self.tracker.tags(run_id, {"state": "COMPLETE"})
        self.tracker.end(run_id)
        s = report.overall
        value, per_task = objective_of(report, self.config.objective)
        self.tracker.metrics(run_id, {"objective": value})
        pair = Pair(overrides=overrides, train=train or {}, checkpoint=checkpoint, generation=generation,
                    source=source, score=value, pass_at_1=s.pass_at_1, ci_low=s.ci_low, ci_high=s.ci_high,
                    per_task=per_task, mlflow_run=run_id)
        return pair, report


def run_dir_of(target: str | Path, runs_dir: Path = Path("runs")) -> Path:
    """A run folder from its path or its name under `runs_dir`."""
    path = Path(target)
    for candidate in (path, runs_dir / path):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SearchError(f"{target}: not a search run folder (expected config.yaml and state.json in it, "
                      f"or a run name under {runs_dir}/)")
