"""`coevo export RUN --out DIR`: the best (harness, checkpoint) pair of a search as one self-contained
bundle (its layout and reading: coevo/bundle.py). What this module adds is the search's side: which pair,
the report with its test scores and lineage (run, MLflow runs, trial, generation, task-set hash, seeds,
versions), and the optional MLflow Model Registry entry.
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
from coevo.search.tracking import store_of

PACKAGES = ("torch", "transformers", "trl", "optuna", "mlflow", "pydantic")


def export_bundle(run_folder: Path, out: Path, row: str = "co-evolved", register: str | None = None
                  ) -> tuple[Path, str | None]:
    from coevo.harness import load_harness
    from coevo.search.config import load_config
    from coevo.search.state import load_state

    config = load_config(run_folder / "config.yaml")
    state = load_state(run_folder / "state.json")
    if not state.done or row not in state.test:
        raise SearchError(f"{run_folder}: the search has not finished its test table (resume it with "
                          f"`coevo search --resume {run_folder}`); rows so far: {', '.join(state.test) or 'none'}")
    out = Path(out)
    check_target(out)
    record = state.test[row]
    # The harness the row was scored under: greedy decoding too, unless the search opted out of it.
    scoring = GREEDY if config.greedy else {}
    harness = load_harness(config.harness).with_overrides({**config.overrides, **prompts_of(run_folder),
                                                           **record["overrides"], **scoring})
    report = bundle_report(config, state, row, record, run_folder)
    write_bundle(out, harness, Path(record["checkpoint"]), report, _readme(report))
    version = register_bundle(config, run_folder, state, out, register) if register else None
    return out, version


def bundle_report(config, state, row: str, record: dict, run_folder: Path) -> dict[str, Any]:
    keep = (*SUMMARY_METRICS, "gain", "gain_low", "gain_high")
    incumbent = state.incumbent
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
        "evolved_templates": evolved_lineage(run_folder, record.get("overrides") or {}),
        "verdict": state.verdict,
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
    t, lin = report["test"], report["lineage"]
    return (f"# coevo bundle: {report['pair']} pair of search '{lin['run']}'\n\n"
            f"Test pass@1 {t['pass_at_1']:.3f} [95% CI {t['ci_low']:.3f}, {t['ci_high']:.3f}] on "
            f"{lin['tasks']['count']} test tasks (task set sha256 {lin['tasks']['sha256'][:12]}).\n"
            f"Source: {lin['source']}, generation {lin['generation']}, seed {lin['seed']}.\n\n"
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
    version = client.create_model_version(name, source, run_id=state.parent_run, tags={
        "pair": report["pair"], "test_pass_at_1": f"{report['test']['pass_at_1']:.4f}",
        "test_ci": f"[{report['test']['ci_low']:.4f}, {report['test']['ci_high']:.4f}]"})
    return str(version.version)


def _exists(client, name: str) -> bool:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
        return True
    except MlflowException:
        return False
