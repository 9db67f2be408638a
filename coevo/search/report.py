"""`coevo compare`: every scored (harness, checkpoint) pair of a run, read back from its MLflow store, best
first, with the harness fields where the variant differs from the base harness. Scores on different task
sets are never ranked together: one table per role (evolve by default; promotion, test, held_out).

A nested trial's weights are a LoRA adapter (coevo/search/nested.py): its row names the adapter and the
harness fingerprint it was trained under (`adapter_record`, also what `coevo export` writes in a bundle)."""

from __future__ import annotations

import json
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
    adapters: dict[tuple[str, str | None], dict | None] = {}  # many runs score one checkpoint
    rows = []
    for r in runs:
        tags, m = r.data.tags, r.data.metrics
        if tags.get("role", "evolve") != role:
            continue
        if phase and tags.get("phase") != phase and not r.info.run_name.startswith(phase):
            continue
        diff = {k: v for k, v in r.data.params.items() if base_params.get(k) != v and not k.startswith("train.")}
        key = (tags.get("checkpoint", ""), tags.get("trial"), tags.get("source"))
        if key not in adapters:
            adapters[key] = adapter_record(folder, key[0], int(key[1]) if key[1] else None, key[2]) if key[0] else None
        adapter = adapters[key] or {}
        rows.append({"run": r.info.run_name, "run_id": r.info.run_id, "phase": tags.get("phase", ""),
                     "generation": int(tags.get("generation", 0)), "state": tags.get("state", r.info.status),
                     "checkpoint": Path(key[0]).name, "source": tags.get("source", ""),
                     "adapter": adapter.get("adapter"), "trained_fingerprint": adapter.get("trained_fingerprint"),
                     **{k: m.get(k) for k in SUMMARY_METRICS}, "error": tags.get("error"), "differs": diff})
    return sorted(rows, key=lambda row: (-(row["pass_at_1"] or -1.0), row["run"]))


def adapter_record(folder: Path, checkpoint: str | Path, trial: int | None = None, label: str | None = None
                   ) -> dict | None:
    """The LoRA adapter behind a pair's weights and what it was trained on (nested.json beside it: the harness
    fingerprint it was trained under, overrides, train values, base, rank, examples); None for weights that
    are no nested adapter. A nested trial's pair and the weights arm's name their adapter folder themselves;
    a phase's merged best (checkpoints/<phase>) is traced through its Optuna trial (its number, or its label
    "n1 #2": a pair's source)."""
    from coevo.train.lora import is_adapter

    path = Path(checkpoint)
    adapter = path if is_adapter(path) else _trial_adapter(folder, path, trial, label)
    if adapter is None:
        return None
    record = adapter.parent / "nested.json"
    info = json.loads(record.read_text()) if record.is_file() else {}
    return {"adapter": str(adapter), "name": adapter.parent.name,
            "trained_fingerprint": info.get("harness_fingerprint"),
            "merged_into": None if adapter == path else str(path),
            **{k: info.get(k) for k in ("overrides", "train", "base", "lora", "own_examples", "oracle_examples")}}


def _trial_adapter(folder: Path, checkpoint: Path, trial: int | None, label: str | None) -> Path | None:
    """The adapter of the nested trial a phase's merged checkpoint (checkpoints/<phase>) came from."""
    import optuna

    from coevo.search.config import load_config
    from coevo.search.stores import engine_url

    if (trial is None and not label) or checkpoint.parent.resolve() != (folder / "checkpoints").resolve():
        return None
    config = load_config(folder / "config.yaml")
    storage = engine_url(config.storage or f"sqlite:///{(folder / 'optuna.db').resolve()}")
    try:
        study = optuna.load_study(study_name=f"{config.name}.{checkpoint.name}", storage=storage)
    except KeyError:  # no study of that name: a w-phase's checkpoint
        return None
    found = [t.user_attrs.get("adapter") for t in study.get_trials(deepcopy=False)
             if t.number == trial or (trial is None and t.user_attrs.get("label") == label)]
    return Path(found[0]) if found and found[0] else None


def fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def print_rows(rows: list[dict], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("run", "gen", "state", "pass@1 [95% CI]", "reward", "turns", "fmt err", "timeouts", "tokens",
                  "weights", "differs from the base harness", title=title)
    for r in rows:
        score = "—" if r["pass_at_1"] is None else f"{r['pass_at_1']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        diff = ", ".join(f"{k}={v}" for k, v in sorted(r["differs"].items())) or "(base)"
        table.add_row(r["run"], str(r["generation"]), r["state"], score, fmt(r["mean_reward"], ".3f"),
                      fmt(r["mean_turns"], ".1f"), fmt(r["format_error_rate"], ".2f"), fmt(r["timeouts"], ".0f"),
                      fmt(r["mean_tokens"], ".0f"), weights(r),
                      diff if not r["error"] else f"[red]{r['error'][:120]}[/]")
    Console(width=200).print(table)


def weights(row: dict) -> str:
    """A row's weights: its checkpoint folder's name, or its LoRA adapter and the harness it was trained under."""
    if not row.get("adapter"):
        return row["checkpoint"]
    return f"adapter {Path(row['adapter']).parent.name} (trained under {(row['trained_fingerprint'] or '?')[:8]})"


def run_report(folder: Path) -> tuple[str, Path]:
    """`coevo report`: the run's final table (or, before it, its ratchet log and wall times) as text, and
    the path of its summary plot (RUN/plots/search.png, drawn from state.json when the search did not)."""
    from coevo.search import final_table, plots
    from coevo.search.config import load_config
    from coevo.search.state import Ledger

    config = load_config(folder / "config.yaml")
    if not (folder / "state.json").is_file():
        raise SearchError(f"{folder}: no state.json yet (has the search started?)")
    state = Ledger(folder / "state.json").state
    objective = "pass@1" if config.objective == "pass_at_1" else "reward"
    if state.test and state.verdict:
        from coevo.search.inputs import load_inputs

        text = final_table.markdown(state, load_inputs(config))
    else:
        text = "\n".join(["No final table yet: the search has not reached its test phase.", "",
                          *final_table.ratchet_lines(state), *final_table.budget_lines(state)]) + "\n"
    path = folder / "plots" / "search.png"
    if not path.is_file():
        plt = plots._pyplot()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure = plots.draw_search(state, config.margin, objective)
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
    return text + _trace_line(folder, config.name), path


def _trace_line(folder: Path, experiment_name: str) -> str:
    from mlflow import MlflowClient

    from coevo.search.tracking import store_of

    uri, _ = store_of(folder)
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        return ""
    count = lambda where: len(client.search_traces(locations=[experiment.experiment_id], filter_string=where,
                                                   include_spans=False, max_results=50_000))
    total, failed = count(None), count("tags.outcome = 'failed'")
    return (f"\nEpisode traces in MLflow: {total} ({failed} failed); browse them with `coevo ui {folder}` "
            "(a run's Traces tab; filter by tags.status, tags.outcome, tags.task).\n")
