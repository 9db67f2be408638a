"""MLflow tracking of a search: one parent run, a child run per phase, a grandchild per trial or
evaluation. Built on `MlflowClient` with explicit run ids (no global "active run"), so that a resumed
search can reopen its runs and a crash leaves nothing half-attached.

Layout in the store (experiment = the run name):
    search <name>                  parent: config params, test-table metrics, plots
      w0 / h1 / w1 / h2 / test     phase runs (tags: phase, generation, checkpoint); GRPO metrics in w runs
        h1 #3, rescore ..., ...    trial / evaluation runs: params = flattened harness, metrics = pass@1
                                   with CI, reward, turns, format errors, timeouts, tokens, per family;
                                   artifacts = harness.yaml, rendered prompts, trajectory sample, per_task.csv;
                                   traces = sampled episodes (every failure on test rows), coevo/search/traces.py

What MLflow (3.17) would otherwise decide for us, and why we do not let it: the URI is always explicit
(sqlite:///... by default), since MLflow's default store lives in whatever directory the command ran from;
the artifact location is explicit, so the artifacts of a local store stay in the run folder; and
LITELLM_LOCAL_MODEL_COST_MAP=True keeps LiteLLM (which MLflow loads) from fetching its model price list
over the network, which stalls on an offline machine.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from coevo.outcomes import SUMMARY_METRICS, passed
from coevo.search.stores import redact

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MAX_PARAM_CHARS = 6000
KIND_TAG, KIND = "mlflow.experimentKind", "custom_model_development"
"""MLflow 3's UI opens an experiment by its kind: training runs (the runs table) rather than a GenAI
app's traces, which it would infer from the episode traces a search writes."""


def default_uri(run_dir: Path) -> str:
    return f"sqlite:///{Path(run_dir).resolve() / 'mlflow.db'}"


def is_local(uri: str) -> bool:
    """A store on this machine (sqlite, files): its artifacts go to the run folder."""
    return uri.startswith(("sqlite:", "file:", "/"))


def store_of(folder: Path) -> tuple[str, str | None]:
    """The tracking URI of a run folder (its config's, or the default sqlite file) and its artifact root."""
    import yaml

    from coevo.search.stores import engine_url

    config = yaml.safe_load((folder / "config.yaml").read_text())
    uri = engine_url(config.get("tracking_uri") or default_uri(folder))
    return uri, (folder / "mlartifacts").resolve().as_uri() if is_local(uri) else None


def flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    """{"limits": {"max_turns": 8}} -> {"limits.max_turns": 8}."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


class Tracker:
    def __init__(self, uri: str, experiment: str, artifact_root: Path | None):
        from mlflow import MlflowClient

        from coevo.search.sqlite_wal import enable_wal
        from coevo.search.stores import engine_url

        enable_wal(uri)
        self.uri = uri
        self.client = MlflowClient(engine_url(uri))
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            location = None
            if artifact_root is not None:
                Path(artifact_root).mkdir(parents=True, exist_ok=True)
                location = Path(artifact_root).resolve().as_uri()
            self.experiment_id = self.client.create_experiment(experiment, artifact_location=location,
                                                               tags={KIND_TAG: KIND})
        else:
            self.experiment_id = found.experiment_id
            if found.tags.get(KIND_TAG) != KIND:  # made before coevo set it: the UI would open on traces
                self.client.set_experiment_tag(self.experiment_id, KIND_TAG, KIND)
        self._traces = None

    # -- runs --------------------------------------------------------------------------------------
    def start(self, name: str, parent: str | None = None, tags: dict[str, Any] | None = None) -> str:
        all_tags = {k: str(v) for k, v in (tags or {}).items()}
        if parent:
            all_tags["mlflow.parentRunId"] = parent
        run = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        return run.info.run_id

    def end(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status=status)

    def reopen(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")

    def kill_running(self, where: str = "", why: str = "resume: left RUNNING by an interrupted search") -> list[str]:
        """End every run of this experiment left RUNNING (by a crash or kill -9) as KILLED; `where`: only
        those that match this filter too."""
        from mlflow.entities import ViewType

        query = " AND ".join(q for q in ("attributes.status = 'RUNNING'", where) if q)
        runs = self.client.search_runs([self.experiment_id], query, run_view_type=ViewType.ACTIVE_ONLY,
                                       max_results=10_000)
        for run in runs:
            self.client.set_tag(run.info.run_id, "killed_by", why)
            self.client.set_terminated(run.info.run_id, status="KILLED")
        return [r.info.run_id for r in runs]

    def kill_trial(self, study: str, number: int) -> None:
        """End the run of a trial whose process died (its heartbeat went stale) as KILLED; the trial's
        retry has a run of its own."""
        self.kill_running(f"tags.study = '{study}' AND tags.trial = '{number}'",
                          "its process stopped beating (killed or lost); the trial was re-run")

    # -- values ------------------------------------------------------------------------------------
    def tags(self, run_id: str, tags: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(run_id, tags=[RunTag(k, redact(str(v))[:5000]) for k, v in tags.items()])

    def params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, _param_text(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i: i + 100])

    def metrics(self, run_id: str, metrics: dict[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, float(v), now, step) for k, v in metrics.items() if v is not None and _finite(v)]
        for i in range(0, len(items), 1000):
            self.client.log_batch(run_id, metrics=items[i: i + 1000])

    def summary(self, run_id: str, report, prefix: str = "") -> None:
        """pass@1 with CI, reward, turns, format errors, timeouts, tokens: overall and per family."""
        values = {f"{prefix}{k}": getattr(report.overall, k) for k in SUMMARY_METRICS}
        for family, s in report.families.items():
            values.update({f"{prefix}family/{family}/{k}": getattr(s, k) for k in ("pass_at_1", "mean_reward")})
        self.metrics(run_id, values)

    # -- artifacts ---------------------------------------------------------------------------------
    def text(self, run_id: str, text: str, path: str) -> None:
        with self._writing(run_id, path):
            self.client.log_text(run_id, text, path)

    def file(self, run_id: str, local: Path, folder: str | None = None) -> None:
        with self._writing(run_id, Path(local).name):
            self.client.log_artifact(run_id, str(local), folder)

    def folder(self, run_id: str, local: Path, folder: str | None = None) -> None:
        with self._writing(run_id, f"{Path(local).name}/"):
            self.client.log_artifacts(run_id, str(local), folder)

    def figure(self, run_id: str, figure, path: str) -> None:
        with tempfile.TemporaryDirectory() as tmp, self._writing(run_id, path):
            out = Path(tmp) / Path(path).name
            figure.savefig(out, dpi=100, bbox_inches="tight")
            self.client.log_artifact(run_id, str(out), str(Path(path).parent) if "/" in path else None)

    @contextmanager
    def _writing(self, run_id: str, what: str):
        """An artifact the store cannot take (a full disk, no permission) says where it was going: the
        bare OSError names neither the store nor the run."""
        try:
            yield
        except OSError as e:
            where = self.client.get_run(run_id).info.artifact_uri
            raise OSError(e.errno, f"MLflow artifact {what} of run {run_id} could not be written to "
                                   f"{redact(where)}: {e.strerror or e}") from e

    def evaluation(self, run_id: str, harness, report, sample: int = 3, traces: int = 0,
                   every_failure: bool = False, trace_tags: dict[str, Any] | None = None, seed: int = 0) -> None:
        """The artifacts of one (harness, checkpoint) evaluation, and `traces` of its episodes as MLflow
        traces (with `every_failure`, every failed episode besides)."""
        self.text(run_id, harness.to_yaml(), "harness.yaml")
        self.text(run_id, rendered_prompts(harness), "rendered_prompts.md")
        self.text(run_id, per_task_csv(report), "per_task.csv")
        if report.trajectories:
            lines = [t.model_dump_json() for t in report.trajectories[:sample]]
            self.text(run_id, "\n".join(lines) + "\n", "trajectories_sample.jsonl")
        self.episodes(run_id, report.trajectories, traces, every_failure, trace_tags, seed)

    # -- traces ------------------------------------------------------------------------------------
    def episodes(self, run_id: str, trajectories: list, n: int, every_failure: bool = False,
                 tags: dict[str, Any] | None = None, seed: int = 0) -> int:
        """`n` episodes drawn from `trajectories` (failures first; with `every_failure`, all failures plus
        `n` passes) as traces linked to `run_id`, and the count as the run's metric `traces`."""
        from coevo.search.stores import engine_url
        from coevo.search.traces import TraceWriter, pick

        chosen = pick(trajectories, n, every_failure, seed) if n or every_failure else []
        if not chosen:
            return 0
        if self._traces is None:
            self._traces = TraceWriter(engine_url(self.uri), self.experiment_id)
        self._traces.write(run_id, chosen, {k: v for k, v in (tags or {}).items() if v not in (None, "")})
        self.metrics(run_id, {"traces": self._traces.tally.by_run[run_id]})
        return len(chosen)

    def trace_metrics(self) -> dict[str, float]:
        """What tracing cost this process: traces written, seconds spent building and writing them."""
        tally = self._traces.tally if self._traces else None
        return {"tracing/traces": tally.traces if tally else 0, "tracing/seconds": tally.seconds if tally else 0.0}


EVAL_EXPERIMENT = "coevo-eval"


def log_eval(uri: str, harness, report, name: str, params: dict[str, Any], traces: int = 4, seed: int = 0) -> str:
    """`coevo eval --tracking-uri`: the evaluation as one run of the experiment `coevo-eval` (params,
    summary metrics, the evaluation's artifacts), with every failed episode and `traces` others as traces.
    A sqlite store keeps its artifacts beside the database file. Returns the run id."""
    from coevo.harness.fingerprint import fingerprint
    from coevo.search.stores import check_url

    check_url("tracking_uri", uri)
    root = Path(uri.removeprefix("sqlite:///")).resolve().parent / "mlartifacts" if uri.startswith("sqlite:///") else None
    tracker = Tracker(uri, EVAL_EXPERIMENT, root)
    run_id = tracker.start(name, tags={"source": "coevo eval", "harness_fingerprint": fingerprint(harness)})
    tracker.params(run_id, {**params, **{k: v for k, v in flatten(harness.model_dump(mode="json")).items()
                                         if k not in ("name", "description", "prompts_dir")}})
    tracker.summary(run_id, report)
    tracker.evaluation(run_id, harness, report, traces=traces, every_failure=True, seed=seed,
                       trace_tags={"run": name, "role": "eval", "checkpoint": Path(str(params.get("model", ""))).name})
    tracker.end(run_id)
    return run_id


def _param_text(value: Any) -> str:
    text = redact(value if isinstance(value, str) else json.dumps(value))  # a storage URL's password
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."


def _finite(v: float) -> bool:
    try:
        return abs(float(v)) != float("inf") and float(v) == float(v)
    except (TypeError, ValueError):
        return False


def per_task_csv(report) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["task", "family", "sample", "passed", "reward", "status", "turns", "format_errors", "timeouts",
                     "tokens", "error"])
    for t in report.trajectories:
        writer.writerow([t.task, t.family, t.sample, int(passed(t)), t.reward, t.status,
                         t.turns, t.format_errors, t.timeouts, t.tokens, (t.error or t.verify_error or "")[:200]])
    return out.getvalue()


def rendered_prompts(harness) -> str:
    """Every message template of the harness rendered with sample values, as the model would read them
    (a native agent's templates as written: it renders them itself)."""
    from coevo.harness.prompts import format_error_text, instance_prompt, observation_text, system_prompt
    from coevo.harness.tools import ToolResult
    from coevo.native.spec import is_native

    if is_native(harness):
        return harness.rendered_prompts()

    initial = "total 8\n-rw-r--r-- 1 nobody nogroup 6 input.txt" if harness.initial_observation else None
    parts = [
        ("system", system_prompt(harness)),
        ("instance", instance_prompt(harness, "Write 42 to /app/answer.txt.", "sample-task", initial)),
        ("observation (success)", observation_text(harness, ToolResult(tool="bash", command="cat input.txt",
                                                                        output="hello", exit_code=0))),
        ("observation (failure)", observation_text(harness, ToolResult(tool="bash", command="cat nope",
                                                                        output="cat: nope: No such file",
                                                                        exit_code=1))),
        ("observation (timeout)", observation_text(harness, ToolResult(tool="bash", command="sleep 999", output="",
                                                                        exit_code=None, timed_out=True))),
        ("format error", format_error_text(harness, "No JSON object found.", harness.recovery.max_format_retries)),
    ]
    return "\n\n".join(f"## {name}\n\n```\n{text}\n```" for name, text in parts) + "\n"
