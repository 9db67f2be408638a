"""`coevo export RUN --out DIR`: the best (harness, checkpoint) pair of a search as one self-contained
bundle (its layout and reading: coevo/bundle.py). What this module adds is the search's side: which pair,
the report with its test scores and lineage (run, MLflow runs, trial, generation, task-set hash, seeds,
versions), and the optional MLflow Model Registry entry.

A nested run's weights are LoRA adapters (coevo/search/nested.py): a pair whose checkpoint is an adapter
folder (the weights-only arm's) is merged over its base into the bundle's model/, and the report's `adapter`
names the adapter and the harness fingerprint it was trained under, also for a phase's merged best pair.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from coevo.bundle import check_target, write_bundle
from coevo.outcomes import SUMMARY_METRICS
from coevo.search.errors import SearchError
from coevo.search.final import ROWS
from coevo.search.inputs import GREEDY
from coevo.search.instructions.lineage import evolved_lineage, prompts_of
from coevo.search.report import adapter_record
from coevo.search.tracking import store_of

PACKAGES = ("torch", "transformers", "trl", "optuna", "mlflow", "pydantic")


def export_bundle(run_folder: Path, out: Path, row: str = "co-evolved", register: str | None = None
                  ) -> tuple[Path, str | None]:
    from coevo.harness import load_harness
    from coevo.search.config import load_config
    from coevo.search.state import load_state

    config = load_config(run_folder / "config.yaml")
    state = load_state(run_folder / "state.json")
    trials = nested_trials(run_folder, config)
    if row in trials:  # a nested trial's pair (harness, adapter), scored on the evolve set only
        record = trials[row]
    elif not state.done:
        raise SearchError(f"{run_folder}: the search has not finished its test table (resume it with "
                          f"`coevo search --resume {run_folder}`); rows so far: {', '.join(state.test) or 'none'}")
    elif row not in state.test:
        raise SearchError(f"{run_folder}: no pair {row!r}; valid: the rows {', '.join(state.test)}"
                          + (f", or a nested trial: {', '.join(trials)}" if trials else ""))
    else:
        record = state.test[row]
    out = Path(out)
    check_target(out)
    # The harness the row was scored under: greedy decoding too, unless the search opted out of it.
    scoring = GREEDY if config.greedy else {}
    harness = load_harness(config.harness).with_overrides({**config.overrides, **prompts_of(run_folder),
                                                           **record["overrides"], **scoring})
    report = bundle_report(config, state, row, record, run_folder)
    write_bundle(out, harness, Path(record["checkpoint"]), report, _readme(report))
    version = register_bundle(config, run_folder, state, out, register) if register else None
    return out, version


def nested_trials(run_folder: Path, config) -> dict[str, dict]:
    """The finished trials of the run's nested phases that trained an adapter, by label ("n1 #2"), each as a
    pair record: the harness it was trained and scored under (nested.json), its adapter, its evolve scores."""
    import optuna

    from coevo.search.schedule import Kind, parse_phases
    from coevo.search.stores import engine_url

    storage = engine_url(config.storage or f"sqlite:///{(run_folder / 'optuna.db').resolve()}")
    out = {}
    for phase in (p.name for p in parse_phases(config.schedule) if p.kind is Kind.N):
        try:
            study = optuna.load_study(study_name=f"{config.name}.{phase}", storage=storage)
        except KeyError:  # the phase has not started
            continue
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            attrs = t.user_attrs
            info_file = Path(attrs.get("adapter", "")).parent / "nested.json"
            if "label" not in attrs or not info_file.is_file():
                continue
            info = json.loads(info_file.read_text())
            out[attrs["label"]] = {"overrides": info["overrides"], "train": info["train"],
                                   "checkpoint": attrs["adapter"], "source": attrs["label"], "trial": t.number,
                                   "score": t.value, **{k: attrs.get(k) for k in (
                                       "pass_at_1", "ci_low", "ci_high", "per_task", "mlflow_run", "fingerprint")}}
    return out


def bundle_report(config, state, row: str, record: dict, run_folder: Path) -> dict[str, Any]:
    keep = (*SUMMARY_METRICS, "gain", "gain_low", "gain_high")
    incumbent = state.incumbent
    if row not in state.test:  # a nested trial: its evolve scores, no test row
        return trial_report(config, state, row, record, run_folder)
    test_tasks = sorted(record["per_task"])
    # The drawn test of a generated suite lives in the run folder; other folders keep their test split.
    drawn = run_folder / "splits" / "test"
    tasks = drawn if (drawn / "manifest.json").is_file() else config.tasks
    return {
        "pair": row,
        "test": {k: record.get(k) for k in keep},
        "table": {r: {k: state.test[r].get(k) for k in keep} for r in ROWS if r in state.test},
        "per_task": record["per_task"],
        "fingerprint": record.get("fingerprint", ""),
        "adapter": adapter_record(run_folder, record["checkpoint"], record.get("trial")),
        "evolved_templates": evolved_lineage(run_folder, record.get("overrides") or {}),
        "verdict": state.verdict and state.verdict.model_dump(),
        "dev": {"objective": config.objective, "score": incumbent.score, "pass_at_1": incumbent.pass_at_1,
                "ci_low": incumbent.ci_low, "ci_high": incumbent.ci_high}
        if row == "co-evolved" else None,
        "lineage": {
            "run": config.name, "run_folder": str(run_folder.resolve()), "mlflow_parent_run": state.parent_run,
            "mlflow_run": record.get("mlflow_run"), "source": record.get("source"), "trial": record.get("trial"),
            "generation": record.get("generation"), "checkpoint": record.get("checkpoint"),
            "overrides": record.get("overrides"), "base_harness": str(config.harness), "schedule": config.schedule,
            "budget": config.budget, "seed": config.seed, "samples": state_samples(run_folder),
            "policy": config.policy or "the checkpoint (local HF model)",
            "tasks": {"path": str(tasks), "sha256": taskset_hash(tasks), "split": "test",
                      "count": len(test_tasks), "names": test_tasks},
            "versions": versions(),
        },
        "reproduce": f"coevo eval --bundle DIR --tasks {tasks} --split test --seed {config.seed} "
                     f"--samples {state_samples(run_folder)}",
    }


def trial_report(config, state, row: str, record: dict, run_folder: Path) -> dict[str, Any]:
    """A nested trial's bundle report: no test scores (only the final table's rows have them), its evolve
    scores, the adapter it trained and the harness fingerprint it was trained under."""
    drawn = run_folder / "splits" / "test"
    tasks = drawn if (drawn / "manifest.json").is_file() else config.tasks
    return {
        "pair": row, "test": None, "table": None, "per_task": record["per_task"],
        "fingerprint": record.get("fingerprint", ""),
        "adapter": adapter_record(run_folder, record["checkpoint"], record["trial"]),
        "evolved_templates": evolved_lineage(run_folder, record.get("overrides") or {}), "verdict": state.verdict and state.verdict.model_dump(),
        "dev": {"objective": config.objective, "score": record["score"], "pass_at_1": record["pass_at_1"],
                "ci_low": record["ci_low"], "ci_high": record["ci_high"], "tasks": len(record["per_task"] or {})},
        "lineage": {"run": config.name, "run_folder": str(run_folder.resolve()), "mlflow_parent_run": state.parent_run,
                    "mlflow_run": record.get("mlflow_run"), "source": row, "trial": record["trial"],
                    "checkpoint": record["checkpoint"], "overrides": record["overrides"],
                    "base_harness": str(config.harness), "schedule": config.schedule, "seed": config.seed,
                    "versions": versions()},
        "reproduce": f"coevo eval --bundle DIR --tasks {tasks} --split test --seed {config.seed} "
                     f"--samples {state_samples(run_folder)}",
    }


def state_samples(run_folder: Path) -> int:
    """Episodes per task of the run's evaluations (the plan's `samples`)."""
    plan_file = run_folder / "plan.json"
    return json.loads(plan_file.read_text()).get("samples", 1) if plan_file.exists() else 1


def taskset_hash(root: Path) -> str:
    """sha256 over every file of the task folder (relative path and bytes), in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def versions() -> dict[str, str]:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import coevo

    out = {"coevo": coevo.__version__, "python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def _readme(report: dict) -> str:
    t, d, lin, adapter = report["test"], report["dev"], report["lineage"], report.get("adapter")
    weights = (f"Weights: LoRA adapter {adapter['adapter']} (trained under harness fingerprint "
               f"{adapter['trained_fingerprint']}), merged over {adapter['base']} into model/.\n"
               if adapter else "")
    gen = f", generation {lin['generation']}" if lin.get("generation") is not None else ""
    scores = (f"Test pass@1 {t['pass_at_1']:.3f} [95% CI {t['ci_low']:.3f}, {t['ci_high']:.3f}] on "
              f"{lin['tasks']['count']} test tasks (task set sha256 {lin['tasks']['sha256'][:12]}).\n" if t else
              f"A nested trial, not scored on the test tasks: evolve pass@1 {d['pass_at_1']:.3f} [95% CI "
              f"{d['ci_low']:.3f}, {d['ci_high']:.3f}] on {d['tasks']} tasks.\n")
    return (f"# coevo bundle: {report['pair']} pair of search '{lin['run']}'\n\n{scores}"
            f"Source: {lin['source']}{gen}, seed {lin['seed']}.\n{weights}\n"
            f"Reproduce (from the repository root):\n\n    {report['reproduce'].replace('DIR', '<this folder>')}\n")


def register_bundle(config, run_folder: Path, state, bundle: Path, name: str) -> str:
    """Log the bundle as an artifact of the search's parent run and register it as a model version."""
    from coevo.search.tracking import Tracker

    uri, artifacts = store_of(run_folder)
    tracker = Tracker(uri, config.name, run_folder / "mlartifacts" if artifacts else None)
    client = tracker.client
    tracker.folder(state.parent_run, bundle, "bundle")
    if not _exists(client, name):
        client.create_registered_model(name, description=f"coevo bundles (harness + checkpoint) of search {config.name}")
    source = client.get_run(state.parent_run).info.artifact_uri.rstrip("/") + "/bundle"
    report = json.loads((bundle / "report.json").read_text())
    adapter = report.get("adapter") or {}
    scores, split = (report["test"], "test") if report["test"] else (report["dev"], "dev")
    version = client.create_model_version(name, source, run_id=state.parent_run, tags={
        "pair": report["pair"], f"{split}_pass_at_1": f"{scores['pass_at_1']:.4f}",
        f"{split}_ci": f"[{scores['ci_low']:.4f}, {scores['ci_high']:.4f}]",
        **({"adapter": adapter["adapter"], "trained_fingerprint": adapter["trained_fingerprint"] or ""}
           if adapter else {})})
    return str(version.version)


def _exists(client, name: str) -> bool:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
        return True
    except MlflowException:
        return False
