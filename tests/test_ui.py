"""A small search seen the way a person sees it: its traces and plot, `coevo report`, and `coevo ui --optuna`
in headless Chromium (Debian's, driven by playwright; .ci/setup installs it), then SIGTERM to `coevo ui`.

Screenshots go to $COEVO_ARTIFACTS, else tests/artifacts/ (git-ignored). The tests of this module share
one search and one `coevo ui`; the last test stops it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from search_helpers import ROOT, write_config

ARTIFACTS = Path(os.environ.get("COEVO_ARTIFACTS") or ROOT / "tests" / "artifacts")
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def search_run(suite, tmp_path_factory):
    from coevo.search.config import load_config
    from coevo.search.run import Search

    folder = tmp_path_factory.mktemp("ui")
    config = load_config(write_config(folder, suite, name="uisearch", arms=False,
                                      plan={"trials": 3, "dev_tasks": 6, "batches": 1},
                                      splits={"promotion": 8, "test": 10}))
    state = Search(config, log=lambda line: None).run()
    return config, state


def _client(config):
    from mlflow import MlflowClient

    from coevo.search.tracking import store_of

    client = MlflowClient(store_of(config.run_dir)[0])
    return client, client.get_experiment_by_name(config.name)


def _traces(client, experiment, run_id=None, where=None):
    return client.search_traces(locations=[experiment.experiment_id], run_id=run_id, filter_string=where,
                                include_spans=False, max_results=5000)


def test_every_trial_and_every_failure_of_the_final_table_is_traced(search_run):
    config, state = search_run
    client, experiment = _client(config)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([experiment.experiment_id], "tags.source != ''", max_results=500)
    trials = [r for r in runs if r.info.run_name.startswith("h1 #")]
    assert len(trials) == 3
    for run in trials:
        traces = _traces(client, experiment, run.info.run_id)
        assert len(traces) == min(4, int(run.data.metrics["episodes"])) == run.data.metrics["traces"]
        assert {t.info.tags["phase"] for t in traces} == {"h1"}
    test_run = next(r for r in runs if r.info.run_name == "test baseline")
    failed = _traces(client, experiment, test_run.info.run_id, "tags.outcome = 'failed'")
    episodes = int(test_run.data.metrics["episodes"])
    assert len(failed) == round(episodes * (1 - test_run.data.metrics["pass_at_1"])) > 0
    parent = client.get_run(state.parent_run).data.metrics
    assert parent["tracing/traces"] == len(_traces(client, experiment)) and parent["tracing/seconds"] > 0


def test_report_prints_the_tables_and_the_plot(search_run):
    config, _ = search_run
    plot = config.run_dir / "plots" / "search.png"
    assert plot.is_file() and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = subprocess.run([sys.executable, "-m", "coevo.cli", "report", str(config.run_dir)], cwd=ROOT, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    assert "| baseline | base |" in out and "2x2 on the same test tasks" in out and "Ratchet log" in out
    assert re.search(r"Episode traces in MLflow: \d+ \(\d+ failed\)", out) and f"plot: {plot}" in out
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(plot, ARTIFACTS / "coevolution_plot.png")  # beside the browser's screenshots


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ui(search_run):
    config, _ = search_run
    ports = _free_port(), _free_port()
    process = subprocess.Popen([sys.executable, "-m", "coevo.cli", "ui", str(config.run_dir), "--optuna", "--port",
                                str(ports[0]), "--optuna-port", str(ports[1])], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    urls, lines = {}, []
    deadline = time.monotonic() + 300  # ~10 s idle; a loaded 2-core machine takes much longer
    while len(urls) < 2 and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if m := re.match(r"(MLflow UI|optuna-dashboard):\s+(\S+)", line):
            urls[m.group(1)] = m.group(2)
    assert len(urls) == 2, "coevo ui printed no URLs:\n" + "".join(lines)
    yield process, ports, urls
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:  # playwright gives each launch a fresh profile folder
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield chromium
        chromium.close()


def _page(browser):
    page = browser.new_page(viewport={"width": 1500, "height": 950})
    page.set_default_timeout(60_000)
    return page


def test_the_mlflow_ui_opens_on_the_runs_table_listing_the_trials(ui, browser):
    _, _, urls = ui
    page = _page(browser)
    page.goto(urls["MLflow UI"])
    for trial in ("h1 #0", "h1 #1", "h1 #2"):
        page.get_by_text(trial, exact=True).first.wait_for()
    page.get_by_text("Sort: objective").wait_for()
    page.get_by_text("ci_low", exact=True).first.wait_for()  # a preselected column (ag-grid draws the visible)
    page.screenshot(path=ARTIFACTS / "mlflow_runs.png")
    page.close()


def test_a_failed_episode_opens_as_a_trace_with_its_turns(ui, browser, search_run):
    config, _ = search_run
    _, (port, _), _ = ui
    client, experiment = _client(config)
    trials = client.search_runs([experiment.experiment_id], "tags.phase = 'h1'", max_results=50)
    failed = next(t for r in trials for t in _traces(client, experiment, r.info.run_id, "tags.outcome = 'failed'"))
    run_id, task = failed.info.trace_metadata["mlflow.sourceRun"], failed.info.tags["task"]
    spans = client.get_trace(failed.info.trace_id).data.spans
    reply = next(s for s in spans if s.name == "turn 1").outputs["reply"]
    page = _page(browser)
    page.goto(f"http://127.0.0.1:{port}/#/experiments/{experiment.experiment_id}/runs/{run_id}/traces"
              "?workflowType=machine_learning")
    page.get_by_text(f"{task}: ").first.click()  # the trace's request: "<task>: <instruction>"
    page.get_by_text(f"episode {task} #").first.wait_for()
    page.get_by_text("turn 1", exact=True).first.wait_for()
    page.get_by_text("verifier", exact=True).first.wait_for()
    page.screenshot(path=ARTIFACTS / "mlflow_failed_trace.png")
    page.get_by_text("turn 1", exact=True).first.click()
    page.get_by_text(reply.strip().splitlines()[0][:40]).first.wait_for()  # the turn's reply
    page.screenshot(path=ARTIFACTS / "mlflow_failed_trace_turn.png")
    page.close()


def test_optuna_dashboard_lists_the_study(ui, browser, search_run):
    config, _ = search_run
    _, _, urls = ui
    page = _page(browser)
    page.goto(urls["optuna-dashboard"])
    page.get_by_text(f"{config.name}.h1").first.wait_for()
    page.screenshot(path=ARTIFACTS / "optuna_dashboard.png")
    page.close()


def _group_members(pgids: set[int]) -> list[tuple[int, str]]:
    """(pid, command) of every live (not zombie) process in these process groups."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) in pgids:
            out.append((int(stat.parent.name), (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")[:120]))
    return out


def _answers(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_stops_every_server_and_frees_both_ports(ui):
    """Last in this module: it stops the `coevo ui` the tests above used."""
    process, ports, _ = ui
    children = [int(p) for p in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()]
    pgids = set(children)  # each server leads its own process group
    assert len(pgids) == 2 and all(_answers(p) for p in ports)
    assert len(_group_members(pgids)) > 2  # the servers' own workers are in their groups too
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    assert _group_members(pgids) == []
    assert not any(_answers(p) for p in ports)
