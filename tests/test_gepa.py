"""GEPA evolving a harness template inside `coevo search`, against real local endpoints: a prompt-sensitive
scripted policy and a scripted reflection LM (tests/gepa_world.py), real sandboxes and verifiers, real
Optuna and MLflow stores. The phrase the policy needs is learnt only from the verifiers' per-check
feedback; the ratchet must then accept the evolved template on the promotion tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gepa_world import (
    CHECKS,
    ChatEndpoint,
    FlakyReflection,
    phrase_policy,
    scripted_reflection,
    write_config,
    write_tasks,
)

CANARY = {"COEVO_CANARY_POLICY_KEY": "sk-canary-policy-7f3a9c",
          "COEVO_CANARY_REFLECTION_KEY": "sk-canary-reflect-2b8e1d"}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    return write_tasks(tmp_path_factory.mktemp("gepa") / "tasks", {"train": 1, "dev": 12, "test": 3})


@pytest.fixture(scope="module")
def evolved_run(tasks, tmp_path_factory):
    """One search whose only key evolves the system template; both endpoints want a key, given only as
    environment variables (canaries)."""
    from coevo.search.config import load_config
    from coevo.search.run import Search

    folder = tmp_path_factory.mktemp("run")
    with pytest.MonkeyPatch.context() as env, ChatEndpoint(phrase_policy) as policy, \
            ChatEndpoint(scripted_reflection) as reflection:
        for name, value in CANARY.items():
            env.setenv(name, value)
        path = write_config(folder, tasks, policy.url, reflection.url,
                            evolve={"api_key_env": "COEVO_CANARY_REFLECTION_KEY"}, arms=True, schedule="h -> h",
                            policy={"backend": "openai", "model": "phrase-policy", "base_url": policy.url,
                                    "api_key_env": "COEVO_CANARY_POLICY_KEY"})
        lines: list[str] = []
        config = load_config(path)
        state = Search(config, log=lines.append).run()
        yield {"config": config, "state": state, "folder": folder, "log": lines, "policy": policy,
               "reflection": reflection}


def result_of(run, phase: str = "h1") -> dict:
    return json.loads((run["config"].run_dir / "gepa" / f"{phase}-system" / "result.json").read_text())


def test_gepa_finds_the_phrase_and_the_ratchet_accepts_it(evolved_run):
    config, state = evolved_run["config"], evolved_run["state"]
    result = result_of(evolved_run)
    best = result["candidates"][0]
    text = (config.run_dir / "prompts" / best["name"]).read_text()
    assert best["score"] == 1.0 and all(check in text for check in CHECKS)
    assert result["seed"] == "system_bash.j2" and result["seed_score"] == 0.0
    assert result["metric_calls"] <= 40 and best["name"] in result["choices"]
    # Lineage: each evolved text names its parent and the diff from it, back to the base template.
    name, chain = best["name"], []
    while name.startswith("evolved/"):
        lineage = json.loads((config.run_dir / "prompts" / name).with_suffix(".json").read_text())
        assert lineage["diff"].startswith(f"--- {lineage['parent']}\n+++ {name}")
        chain.append(lineage)
        name = lineage["parent"]
    assert name == "system_bash.j2" and len(chain) == 2  # one phrase per reflection step
    assert f"+Always {CHECKS[0]}." in chain[-1]["diff"]
    # The evolved template was a choice like any other; the ratchet accepted it on the promotion tasks.
    assert state.incumbent.overrides["templates.system"] == best["name"]
    decision = next(r for r in state.history if r["phase"] == "h1")
    assert decision["accepted"] and decision["wins"] > decision["losses"] and decision["gain_low"] > 0
    assert state.test["co-evolved"]["pass_at_1"] == 1.0 and state.test["baseline"]["pass_at_1"] == 0.0
    # h2 starts GEPA from the accepted text, which is already perfect: nothing new, the same choices kept.
    again = result_of(evolved_run, "h2")
    assert again["seed"] == best["name"] and again["candidates"] == [] and again["metric_calls"] == 6
    assert again["choices"][:2] == ["system_bash.j2", best["name"]]
    # The harness-only arm chose among what both generation-0 phases evolved (GEPA is part of its lever).
    assert state.arms["harness-only"].overrides["templates.system"].startswith("evolved/")


def test_reflection_reads_instruction_actions_and_per_check_results(evolved_run):
    prompts = [s["body"]["messages"][-1]["content"] for s in evolved_run["reflection"].seen]
    assert prompts and "Put the number" in prompts[0] and "printf" in prompts[0]  # instruction and actions
    assert f"- {CHECKS[0]}: FAILED" in prompts[0]  # the verifier's reward.json checks
    assert "{{ example }}" in prompts[0]  # the current template, as Jinja source


def test_evolved_templates_are_tracked_in_mlflow(evolved_run):
    from mlflow import MlflowClient

    config = evolved_run["config"]
    client = MlflowClient(f"sqlite:///{config.run_dir / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name(config.name).experiment_id], max_results=200)
    gepa = next(r for r in runs if r.info.run_name == "h1 gepa templates.system")
    best = result_of(evolved_run)["candidates"][0]["name"]
    assert gepa.data.tags[f"lineage/{best}"].startswith("evolved/system-")
    assert gepa.data.metrics["best_score"] == 1.0 and gepa.data.params["gepa.budget"] == "40"
    artifacts = {a.path for a in client.list_artifacts(gepa.info.run_id, "templates/evolved")}
    assert f"templates/{best}" in artifacts
    trial = next(r for r in runs if r.info.run_name == "h1 #0")
    assert trial.data.params["templates.system"] == best


def test_the_bundle_carries_the_evolved_template_and_its_lineage(evolved_run, tmp_path):
    from coevo.bundle import load_bundle
    from coevo.harness.prompts import system_prompt
    from coevo.search.export import export_bundle

    out, _ = export_bundle(evolved_run["config"].run_dir, tmp_path / "bundle")
    harness, _, report = load_bundle(out)
    assert harness.templates.system.startswith("evolved/") and all(c in system_prompt(harness) for c in CHECKS)
    chain = report["evolved_templates"][harness.templates.system]
    assert [c["parent"] for c in chain][-1] == "system_bash.j2"
    evolved_run["bundle"] = out


def test_keys_come_from_the_environment_and_are_written_nowhere(evolved_run):
    for seen, name in ((evolved_run["policy"].seen, "COEVO_CANARY_POLICY_KEY"),
                       (evolved_run["reflection"].seen, "COEVO_CANARY_REFLECTION_KEY")):
        assert seen and {s["auth"] for s in seen} == {f"Bearer {CANARY[name]}"}
    folders = [evolved_run["folder"]] + ([evolved_run["bundle"]] if "bundle" in evolved_run else [])
    files = [p for folder in folders for p in Path(folder).rglob("*") if p.is_file()]
    assert len(files) > 20  # stores, artifacts, GEPA's state, templates, config
    for secret in CANARY.values():
        leaks = [str(p) for p in files if secret.encode() in p.read_bytes()]
        assert not leaks, f"key written to {leaks}"
        assert not any(secret in line for line in evolved_run["log"])


def test_a_resumed_phase_reads_gepa_back_instead_of_running_it(evolved_run):
    from coevo.search.instructions.evolve import evolve_instructions
    from coevo.search.run import Search

    policy, reflection = evolved_run["policy"].seen, evolved_run["reflection"].seen
    calls = (len(policy), len(reflection))
    choices = result_of(evolved_run)["choices"]
    search = Search(evolved_run["config"], resume=True, log=lambda line: None)
    param = search.ctx.inputs.space.params[0]
    evolve_instructions(search.ctx, "h1", "unused")
    assert param.choices == choices and (len(policy), len(reflection)) == calls
    # Killed after GEPA's last step but before its result was written: GEPA continues from its saved state
    # (here: already perfect). It re-scores its seed first (gepa 0.1.4 does before reading its state), and
    # asks the reflection LM nothing again.
    (evolved_run["config"].run_dir / "gepa" / "h1-system" / "result.json").unlink()
    param.choices = ["system_bash.j2"]
    evolve_instructions(search.ctx, "h1", search.ctx.ledger.state.phase_runs["h1"])
    assert param.choices == choices and (len(policy), len(reflection)) == (calls[0] + 6, calls[1])


def test_a_failing_reflection_lm_loses_candidates_not_the_search(tasks, tmp_path, evolved_run):
    from coevo.search.config import load_config
    from coevo.search.run import Search

    flaky = FlakyReflection(slow_s=2.5)
    with ChatEndpoint(phrase_policy) as policy, ChatEndpoint(flaky) as reflection:
        path = write_config(tmp_path, tasks, policy.url, reflection.url, budget=60, evolve={"timeout_s": 1},
                            plan={"trials": 1, "dev_tasks": 6, "batches": 1},
                            model=str(evolved_run["config"].run_dir / "model"))  # built once (the policy is an endpoint)
        config = load_config(path)
        state = Search(config, log=lambda line: None).run()
    assert state.done
    rows = [json.loads(line) for line in (config.run_dir / "gepa" / "h1-system" / "rejected.jsonl").open()]
    reasons = [r["reason"] for r in rows]
    assert len(reasons) == 4, reasons
    assert reasons[0].startswith("reflection LM failed") and "scripted failure" in reasons[0]
    assert reasons[1].startswith("reflection LM failed") and "time" in reasons[1]
    assert reasons[2].startswith("malformed reply")
    assert "no_such_variable" in reasons[3] and rows[3]["text"]
    result = json.loads((config.run_dir / "gepa" / "h1-system" / "result.json").read_text())
    assert len(result["rejected"]) == 4 and result["candidates"][0]["score"] == 1.0  # and the search went on
    assert not list((config.run_dir / "prompts" / "evolved").glob("*no_such*"))


def test_bad_evolve_entries_name_the_file_the_key_and_what_is_valid(tmp_path):
    from coevo.search.errors import SearchError
    from coevo.search.space_check import load_space

    path = tmp_path / "space.yaml"
    path.write_text("system_instructions: {evolve: gepa, budget: 40, reflection_lm: openai/x}\n"
                    "templates.instance: {evolve: dspy, reflection_lm: openai/x}\n")
    with pytest.raises(SearchError) as e:
        load_space(path)
    text = str(e.value)
    assert f"{path}: 'system_instructions': 'evolve' applies to a template slot; valid keys: templates.system" in text
    assert f"{path}: 'templates.instance': field 'evolve': Input should be 'gepa'" in text
    assert f"{path}: 'templates.instance': field 'budget': Field required" in text


def test_an_unset_key_variable_is_an_error_naming_it(monkeypatch):
    from coevo.search.errors import SearchError
    from coevo.search.instructions.evolve import reflection_lm
    from coevo.search.instructions.spec import EvolveSpec

    monkeypatch.delenv("COEVO_NO_SUCH_KEY", raising=False)
    spec = EvolveSpec(evolve="gepa", budget=4, reflection_lm="openai/x", api_key_env="COEVO_NO_SUCH_KEY")
    with pytest.raises(SearchError, match="space.yaml: 'templates.system': api_key_env: .*COEVO_NO_SUCH_KEY"):
        reflection_lm(spec, Path("space.yaml"), "templates.system")


def test_check_names_an_unset_key_and_counts_gepa_episodes(tasks, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from coevo.cli import app

    monkeypatch.delenv("COEVO_UNSET_REFLECTION_KEY", raising=False)
    unused = "http://127.0.0.1:9/v1"  # preflight calls neither endpoint
    path = write_config(tmp_path, tasks, unused, unused, evolve={"api_key_env": "COEVO_UNSET_REFLECTION_KEY"})
    result = CliRunner().invoke(app, ["check", str(path)], env={"COLUMNS": "400"})
    out = " ".join(result.output.split())
    assert result.exit_code == 1 and "FAIL space" in out, out
    assert "'templates.system': api_key_env: the environment variable COEVO_UNSET_REFLECTION_KEY is unset" in out
    monkeypatch.setenv("COEVO_UNSET_REFLECTION_KEY", "set-now")
    result = CliRunner().invoke(app, ["check", str(path)], env={"COLUMNS": "400"})
    assert result.exit_code == 0 and "40 GEPA episodes" in " ".join(result.output.split()), result.output
