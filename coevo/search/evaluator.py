"""Scoring one (harness, checkpoint) pair of a search in its own MLflow run: the one path every trial,
re-score and test row takes, so all of them are scored on the same batches with the same seeds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coevo.search.inputs import Inputs
from coevo.search.scoring import Pruned, objective_of, score
from coevo.search.state import Pair
from coevo.search.tracking import Tracker, flatten

PolicyFactory = Callable[[Any, str, list], Any]
"""(harness, checkpoint folder, tasks) -> Policy."""


class Evaluator:
    def __init__(self, inputs: Inputs, tracker: Tracker, policy_factory: PolicyFactory | None = None):
        self.inputs, self.tracker = inputs, tracker
        self.policy = policy_factory or self._default_policy
        self._policy_cache: tuple[str, Any] | None = None
        self.evolve_batches: list[list] = inputs.dev_batches
        """What a pair is scored on by default: the evolve set now (coevo/search/curriculum.py refreshes it)."""

    def _default_policy(self, harness, checkpoint: str, tasks: list):
        """The config's policy, or else the checkpoint itself (one model loaded per checkpoint); a LoRA
        adapter folder (a nested trial's) is loaded merged over its base model. `policy: {backend: vllm}`
        generates the checkpoint on a vLLM server (adapters hot-loaded over their base: coevo.vllm)."""
        from coevo.policy import make_policy

        config = self.inputs.config
        spec = dict(config.policy or {})
        if spec.get("backend") == "synthetic":
            spec.setdefault("seed", config.seed)  # the run's seed unless the config gives the policy its own
        if spec and spec.get("backend") != "vllm":
            return make_policy(spec, harness=harness, tasks=tasks)
        if self._policy_cache is None or self._policy_cache[0] != checkpoint:  # vllm: one server, weights swapped
            model_spec = {"backend": "hf", **spec, "model": checkpoint}
            if model_spec["backend"] == "vllm":
                model_spec = {**config.vllm_defaults(), **model_spec}
            self._policy_cache = (checkpoint, make_policy(model_spec))
        return self._policy_cache[1]

    def evaluate(self, name: str, parent: str, overrides: dict[str, Any], checkpoint: str, generation: int,
                 source: str, task_batches: list[list] | None = None, trial=None, tags: dict | None = None,
                 train: dict | None = None, first_step: int = 0) -> tuple[Pair, Any]:
        """Score a pair (dev batches by default) in its own MLflow run; raises Pruned or the failure. With a
        `trial`, the running objective is reported to its pruner from step `first_step` on."""
        from coevo.harness.fingerprint import fingerprint

        config, tracker = self.inputs.config, self.tracker
        run_id = tracker.start(name, parent, {"phase": name.split()[0], "generation": generation,
                                              "checkpoint": checkpoint, "source": source, **(tags or {})})
        try:
            harness = self.inputs.scoring_harness(overrides)
            tracker.tags(run_id, {"harness_fingerprint": fingerprint(harness)})
            params = {k: v for k, v in flatten(harness.model_dump(mode="json")).items()
                      if k not in ("name", "description", "prompts_dir")}
            tracker.params(run_id, {**params, **{f"train.{k}": v for k, v in (train or {}).items()}})
            task_batches = task_batches or self.evolve_batches
            policy = self.policy(harness, checkpoint, [t for b in task_batches for t in b])
            partial = lambda i, v, n: tracker.metrics(
                run_id, {f"partial_{config.objective}": v, "episodes_so_far": n}, step=i)
            report = score(task_batches, harness, policy, self.inputs.plan.samples, config.seed, config.sandbox,
                           trial=trial, objective=config.objective, first_step=first_step, on_batch=partial)
        except Pruned as p:
            tracker.tags(run_id, {"state": "PRUNED", "pruned_after_batch": p.step + 1})
            tracker.summary(run_id, p.partial)
            tracker.episodes(run_id, p.partial.trajectories, config.traces, tags=_trace_tags(name, checkpoint, tags),
                             seed=config.seed)
            tracker.end(run_id)
            raise
        except Exception as e:
            tracker.tags(run_id, {"state": "FAIL", "error": f"{type(e).__name__}: {e}"})
            tracker.end(run_id, "FAILED")
            raise
        except BaseException:
            tracker.end(run_id, "KILLED")
            raise
        try:
            self.tracker.evaluation(run_id, harness, report, traces=config.traces, seed=config.seed,
                                    every_failure=(tags or {}).get("role") in ("test", "held_out"),
                                    trace_tags=_trace_tags(name, checkpoint, tags))
        except OSError as e:  # the artifact store (a full disk): the score stands, the run says what it lacks
            tracker.tags(run_id, {"artifacts_error": f"{type(e).__name__}: {e}"[:500]})
        return self._record(run_id, harness, report, overrides, checkpoint, generation, source, train), report

    def _record(self, run_id: str, harness, report, overrides: dict[str, Any], checkpoint: str, generation: int,
                source: str, train: dict | None) -> Pair:
        """The finished evaluation's artifacts and summary in MLflow, and its Pair for the state."""
        from coevo.harness.fingerprint import fingerprint
        from coevo.search.failures import clusters

        failures = clusters(report.trajectories)
        self.tracker.summary(run_id, report)
        self.tracker.metrics(run_id, {f"failures/{c}": n for c, n in failures.items()})
        self.tracker.tags(run_id, {"state": "COMPLETE"})
        self.tracker.end(run_id)
        s = report.overall
        value, per_task = objective_of(report, self.inputs.config.objective)
        self.tracker.metrics(run_id, {"objective": value})
        return Pair(overrides=overrides, train=train or {}, checkpoint=checkpoint, generation=generation,
                    source=source, score=value, pass_at_1=s.pass_at_1, ci_low=s.ci_low, ci_high=s.ci_high,
                    per_task=per_task, mlflow_run=run_id, fingerprint=fingerprint(harness), failures=failures)


def _trace_tags(name: str, checkpoint: str, tags: dict | None) -> dict[str, str]:
    """What each trace of an evaluation is tagged with, for the UI's trace filter."""
    from pathlib import Path

    return {"run": name, "phase": name.split()[0], "checkpoint": Path(checkpoint).name,
            **{k: str(v) for k, v in (tags or {}).items() if k in ("role", "row")}}
