"""A nested run (schedule "n") seen through the user-facing commands: `coevo compare` lists each trial as a
pair (harness, adapter) with the harness fingerprint the adapter was trained under, `coevo ui`'s saved view
opens on the objective, the harness fields that differ and the adapter, `coevo export` merges an adapter over
its base into a bundle that records it, and `coevo check` estimates a nested config's time. One small real
nested search serves them all (conftest's `nested_run`, shared with tests/test_search_nested.py)."""

from __future__ import annotations

import json
from pathlib import Path

from search_helpers import NESTED_FIELDS, NESTED_SPACE, write_config
from typer.testing import CliRunner

from coevo.cli import app

ENV = {"COLUMNS": "400"}


def test_compare_lists_each_nested_trial_as_its_harness_and_adapter(nested_run):
    from coevo.search.report import variant_rows

    folder, trials = nested_run.folder, nested_run.trials
    rows = {r["run"]: r for r in variant_rows(folder)}
    for t in trials:
        row = rows[f"{t.user_attrs['label']} eval"]
        assert row["adapter"] == t.user_attrs["adapter"]
        assert row["trained_fingerprint"] == t.user_attrs["trained_fingerprint"]
    assert rows["baseline"]["adapter"] is None  # the start model is no adapter
    promotion = [r for r in variant_rows(folder, role="promotion") if r["adapter"]]
    arm = {Path(r["adapter"]).parent.name for r in promotion}  # the weights arm's trainings, under the base harness
    assert {f"arm-weights-{i}" for i in range(3)} <= arm
    result = CliRunner().invoke(app, ["compare", str(folder)], env=ENV)
    assert result.exit_code == 0, result.output
    first = trials[0].user_attrs
    assert f"adapter {Path(first['adapter']).parent.name} (trained under {first['trained_fingerprint'][:8]})" \
        in result.output


def test_the_ui_view_opens_on_objective_differing_fields_and_adapter(nested_run):
    from mlflow import MlflowClient

    from coevo.search.ui import VIEW_KEY, prepare

    folder, trials = nested_run.folder, nested_run.trials
    uri, _, _, experiment_id = prepare(folder)
    client = MlflowClient(uri)
    view = json.loads(client.get_experiment(experiment_id).tags[f"mlflow.sharedViewState.{VIEW_KEY}"])
    columns = view["selectedColumns"]
    searched = {t.params["templates.system"] for t in trials}
    assert columns[0] == "metrics.`objective`" and view["orderByKey"] == "metrics.`objective`"
    if len(searched) > 1:  # the trials drew both templates: the field that tells them apart is shown
        assert "params.`templates.system`" in columns
    assert "params.`decoding.temperature`" not in columns  # the same in every pair
    assert columns.index("tags.`adapter`") < columns.index("metrics.`pass_at_1`")
    assert "tags.`trained_fingerprint`" in columns
    runs = {r.info.run_name: r for r in client.search_runs([experiment_id], "tags.source != ''", max_results=500)}
    for t in trials:
        tags = runs[f"{t.user_attrs['label']} eval"].data.tags
        assert (folder / tags["adapter"]).resolve() == Path(t.user_attrs["adapter"]).resolve()
        assert tags["trained_fingerprint"] == t.user_attrs["trained_fingerprint"]


def test_export_bundles_a_nested_trials_pair_with_its_adapter_merged(nested_run, tmp_path):
    import torch

    from coevo.bundle import load_bundle
    from coevo.policy import make_policy
    from coevo.train.lora import is_adapter

    folder, trials = nested_run.folder, nested_run.trials
    trial = trials[-1].user_attrs
    adapter = Path(trial["adapter"])
    assert is_adapter(adapter)
    result = CliRunner().invoke(app, ["export", str(folder), "--out", str(tmp_path / "bundle"), "--row",
                                      trial["label"]], env=ENV)
    assert result.exit_code == 0, result.output
    harness, model_dir, report = load_bundle(tmp_path / "bundle")
    assert (model_dir / "config.json").is_file() and (model_dir / "adapter" / "adapter_config.json").is_file()
    trained = json.loads((adapter.parent / "nested.json").read_text())
    assert report["adapter"]["adapter"] == str(adapter) and report["pair"] == trial["label"]
    assert report["adapter"]["trained_fingerprint"] == trained["harness_fingerprint"] == trial["trained_fingerprint"]
    assert report["adapter"]["base"] == trained["base"] and report["test"] is None  # a trial has no test row
    assert report["dev"]["pass_at_1"] == trial["pass_at_1"] and report["fingerprint"] == trial["fingerprint"]
    assert harness.templates.system == trained["overrides"]["templates.system"]  # the harness it trained under
    assert "trained under harness fingerprint" in (tmp_path / "bundle" / "README.md").read_text()
    wrong = CliRunner().invoke(app, ["export", str(folder), "--out", str(tmp_path / "b2"), "--row", "n1 #99"])
    assert wrong.exit_code == 2 and trial["label"] in " ".join(wrong.output.split())

    # The bundle's merged model and the adapter folder given to a policy by name (the evaluator's path)
    # are the same weights.
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    bundled, by_name = make_policy(str(model_dir)), make_policy(str(adapter))
    assert not any("lora" in name for name, _ in by_name.model.named_modules())  # merged: a plain model
    with torch.no_grad():
        logits = [p.model(ids).logits for p in (bundled, by_name)]
        base = make_policy(trained["base"]).model(ids).logits
    assert torch.allclose(logits[0], logits[1], atol=1e-5)
    assert not torch.allclose(logits[0], base, atol=1e-6)  # the adapter changed the weights


def test_a_phases_merged_best_is_traced_to_its_trials_adapter(nested_run):
    from coevo.search.report import adapter_record

    folder, state, trials = nested_run.folder, nested_run.state, nested_run.trials
    best = state.pool[0]  # the phase's best pair, merged into checkpoints/n1
    assert Path(best.checkpoint) == folder / "checkpoints" / "n1" and best.trial is not None
    record = adapter_record(folder, best.checkpoint, best.trial)
    trial = next(t for t in trials if t.number == best.trial)
    assert record["adapter"] == trial.user_attrs["adapter"] and record["merged_into"] == best.checkpoint
    assert record["trained_fingerprint"] == trial.user_attrs["trained_fingerprint"]
    assert adapter_record(folder, state.baseline.checkpoint, None) is None


def test_check_estimates_a_nested_configs_time(suite, tmp_path):
    from coevo.search.preflight import preflight

    config = write_config(tmp_path, suite, **NESTED_FIELDS)
    (tmp_path / "space.yaml").write_text(NESTED_SPACE)
    rows = {r.check: r for r in preflight(config)}
    estimate = rows["estimate"]
    assert estimate.status == "PASS", estimate.detail
    parts = {p.name.split(":")[0]: p for p in estimate.table}
    assert parts["n1"].trainings == 3 and parts["n1"].model == 3 * 4 and parts["n1"].oracle == 3 * 3
    assert parts["arm weights-only"].trainings == 3 and parts["arm harness-only"].model == 3 * 4
    assert parts["final table"].model == 6 * 9  # six rows on the plan's test tasks: the suite's 9
    assert all(p.seconds > 0 for p in estimate.table)
    assert estimate.seconds < 30  # cheap: one oracle episode, no model loaded
    result = CliRunner().invoke(app, ["check", str(config)], env=ENV)
    assert result.exit_code == 0, result.output
    total = next(line.split() for line in result.output.splitlines() if line.strip().startswith("total"))
    assert "Time estimate (an estimate" in result.output and total[1:4] == ["114", "18", "6"]  # episodes, trainings
    assert "min serial" in result.output
