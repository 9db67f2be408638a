"""One GEPA run in MLflow: a child of the phase's run, `<phase> gepa <key>`, with the settings as params
(the key's variable NAME at most, never a key), the scores as metrics, every evolved text, its lineage
and the rejected proposals as artifacts, and each candidate's parent as a tag."""

from __future__ import annotations

import json

from coevo.search.instructions.lineage import TemplateStore, read_lineage


def log_result(tracker, parent_run: str, phase: str, key: str, spec, summary: dict, store: TemplateStore) -> str:
    run_id = tracker.start(f"{phase} gepa {key}", parent_run, {"phase": phase, "kind": "gepa", "slot": store.slot})
    tracker.params(run_id, {f"gepa.{k}": v for k, v in spec.model_dump().items()})
    tracker.metrics(run_id, {
        "seed_score": summary["seed_score"],
        "best_score": max([c["score"] for c in summary["candidates"]] + [summary["seed_score"]]),
        "metric_calls": summary["metric_calls"] or 0, "candidates": len(summary["candidates"]),
        "rejected": len(summary["rejected"]), "wall_seconds": summary["seconds"]})
    tags = {"seed": summary["seed"], "choices": json.dumps(summary["choices"])}
    for candidate in summary["candidates"]:
        name = candidate["name"]
        lineage = read_lineage(store.prompts_dir, name) or {"parent": ",".join(candidate["parents"]), "diff": ""}
        tags[f"lineage/{name}"] = lineage["parent"]
        tracker.text(run_id, (store.prompts_dir / name).read_text(), f"templates/{name}")
        tracker.text(run_id, json.dumps({**lineage, "score": candidate["score"]}, indent=1),
                     f"templates/{name.removesuffix('.j2')}.json")
    tracker.tags(run_id, tags)
    tracker.text(run_id, json.dumps(summary, indent=1), "gepa_result.json")
    tracker.end(run_id)
    return run_id
