"""`coevo compare`: every scored (harness, checkpoint) pair of a run, read back from its MLflow store, best
first, with the harness fields where the variant differs from the base harness. Scores on different task
sets are never ranked together: one table per role (evolve by default; promotion, test, held_out)."""

from __future__ import annotations

from pathlib import Path

from coevo.outcomes import SUMMARY_METRICS
from coevo.search.errors import SearchError

ROLES = ("evolve", "promotion", "test", "held_out")
"""The task roles an evaluation can be scored on (its MLflow tag `role`; evolve runs carry none)."""


def variant_rows(folder: Path, phase: str | None = None, role: str = "evolve") -> list[dict]:
    from mlflow import MlflowClient
    from mlflow.entities import ViewType

    from coevo.search.config import load_config
    from coevo.search.tracking import store_of

    if role not in ROLES:
        raise SearchError(f"--role {role!r}: valid are {', '.join(ROLES)}")
    config = load_config(folder / "config.yaml")
    uri, _ = store_of(folder)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(config.name)
    if experiment is None:
        raise SearchError(f"{folder}: no MLflow experiment '{config.name}' in {uri}")
    runs = client.search_runs([experiment.experiment_id], "tags.source != ''", run_view_type=ViewType.ALL,
                              max_results=5000)
    base = next((r for r in runs if r.data.tags.get("source") == "baseline"), None)
    base_params = base.data.params if base else {}
    rows = []
    for r in runs:
        tags, m = r.data.tags, r.data.metrics
        if tags.get("role", "evolve") != role:
            continue
        if phase and tags.get("phase") != phase and not r.info.run_name.startswith(phase):
            continue
        diff = {k: v for k, v in r.data.params.items() if base_params.get(k) != v and not k.startswith("train.")}
        rows.append({"run": r.info.run_name, "run_id": r.info.run_id, "phase": tags.get("phase", ""),
                     "generation": int(tags.get("generation", 0)), "state": tags.get("state", r.info.status),
                     "checkpoint": Path(tags.get("checkpoint", "")).name, "source": tags.get("source", ""),
                     **{k: m.get(k) for k in SUMMARY_METRICS}, "error": tags.get("error"), "differs": diff})
    return sorted(rows, key=lambda row: (-(row["pass_at_1"] or -1.0), row["run"]))


def fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def print_rows(rows: list[dict], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("run", "gen", "state", "pass@1 [95% CI]", "reward", "turns", "fmt err", "timeouts", "tokens",
                  "differs from the base harness", title=title)
    for r in rows:
        score = "—" if r["pass_at_1"] is None else f"{r['pass_at_1']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        diff = ", ".join(f"{k}={v}" for k, v in sorted(r["differs"].items())) or "(base)"
        table.add_row(r["run"], str(r["generation"]), r["state"], score, fmt(r["mean_reward"], ".3f"),
                      fmt(r["mean_turns"], ".1f"), fmt(r["format_error_rate"], ".2f"), fmt(r["timeouts"], ".0f"),
                      fmt(r["mean_tokens"], ".0f"), diff if not r["error"] else f"[red]{r['error'][:120]}[/]")
    Console(width=200).print(table)
