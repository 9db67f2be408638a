"""`coevo ui RUN [--optuna]`: the MLflow UI on a run's tracking store and, with --optuna, optuna-dashboard
on its Optuna storage, each a child process in its own process group; Ctrl-C or SIGTERM stops every
server it started (the whole group: the servers' own workers too).

The MLflow link opens a saved view of the experiment (MLflow's shared view state: an experiment tag
`mlflow.sharedViewState.<key>`, read by the UI from `?viewStateShareKey=<key>`): the scored pairs only
(runs tagged `source`), best objective first, opening on what tells them apart: the objective, the harness
fields whose values differ between the pairs and, in a nested run, the LoRA adapter each pair's weights are
(tags `adapter` and `trained_fingerprint`, the harness it was trained under); then pass@1 and its interval,
reward, turns, format errors and traces.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

VIEW_KEY = "coevo-pairs"
VIEW_METRICS = ("objective", "pass_at_1", "ci_low", "ci_high", "mean_reward", "mean_turns", "format_error_rate",
                "timeouts", "traces")
VIEW_TAGS = ("phase", "state", "source")
ADAPTER_TAGS = ("adapter", "trained_fingerprint")


def view_state(differs: Sequence[str], adapters: bool = False) -> dict:
    """The shared view: the runs table's filter, order and columns (MLflow's column ids: type.`name`)."""
    columns = ["metrics.`objective`", *(f"params.`{k}`" for k in differs),
               *(f"tags.`{t}`" for t in ADAPTER_TAGS if adapters),
               *(f"metrics.`{m}`" for m in VIEW_METRICS[1:]), *(f"tags.`{t}`" for t in VIEW_TAGS)]
    return {"searchFilter": "tags.source != ''", "orderByKey": "metrics.`objective`", "orderByAsc": False,
            "selectedColumns": columns}


def prepare(folder: Path) -> tuple[str, str | None, str, str]:
    """(tracking URI, artifact root, Optuna storage URL, experiment id) of a run folder; the experiment is
    marked as training runs and given the saved view, and pairs whose weights are an adapter are tagged with it."""
    import yaml
    from mlflow import MlflowClient
    from mlflow.entities import ViewType

    from coevo.search.errors import SearchError
    from coevo.search.stores import engine_url
    from coevo.search.tracking import KIND, KIND_TAG, store_of

    uri, artifacts = store_of(folder)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    storage = engine_url(config.get("storage") or f"sqlite:///{(folder / 'optuna.db').resolve()}")
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(config["name"])
    if experiment is None:
        raise SearchError(f"{folder}: no MLflow experiment '{config['name']}' in {uri} (has the search started?)")
    client.set_experiment_tag(experiment.experiment_id, KIND_TAG, KIND)
    runs = client.search_runs([experiment.experiment_id], "tags.source != ''", run_view_type=ViewType.ALL,
                              max_results=5000)
    adapters = tag_adapters(client, folder, runs)
    view = json.dumps(view_state(differing_fields(runs, _space_keys(folder, config)), adapters))
    client.set_experiment_tag(experiment.experiment_id, f"mlflow.sharedViewState.{VIEW_KEY}", view)
    return uri, artifacts, storage, experiment.experiment_id


def differing_fields(runs: list, space_keys: list[str]) -> list[str]:
    """The harness fields (params, train.* left out) whose values differ between the scored pairs, the searched
    ones first; the searched fields when no pair is scored yet."""
    values: dict[str, set] = {}
    for r in runs:
        for k in {*values, *r.data.params}:
            values.setdefault(k, set()).add(r.data.params.get(k))
    differ = {k for k, v in values.items() if len(v) > 1 and not k.startswith("train.")}
    if not differ:
        return space_keys
    return [k for k in space_keys if k in differ] + sorted(differ - set(space_keys))


def tag_adapters(client, folder: Path, runs: list) -> bool:
    """Tag each scored pair whose weights are a nested LoRA adapter with it (its path in the run folder) and
    the harness fingerprint it was trained under (coevo/search/report.py: adapter_record); whether any is."""
    from coevo.search.report import adapter_record

    found, records = False, {}
    for r in runs:
        key = (r.data.tags.get("checkpoint", ""), r.data.tags.get("trial"), r.data.tags.get("source"))
        if key not in records:
            records[key] = adapter_record(folder, key[0], int(key[1]) if key[1] else None, key[2]) if key[0] else None
        if records[key] is None:
            continue
        found = True
        adapter = Path(records[key]["adapter"])
        shown = adapter.relative_to(folder.resolve()) if adapter.is_relative_to(folder.resolve()) else adapter
        tags = {"adapter": str(shown), "trained_fingerprint": records[key]["trained_fingerprint"] or ""}
        for k, v in tags.items():
            if r.data.tags.get(k) != v:
                client.set_tag(r.info.run_id, k, v)
    return found


def _space_keys(folder: Path, config: dict) -> list[str]:
    """The dotted harness fields the run's space searches (train.* keys are GRPO options, not params)."""
    import yaml

    space = Path(config.get("space") or "")
    if not space.is_file():
        return []
    keys = list((yaml.safe_load(space.read_text()) or {}).keys())
    return [k for k in keys if not k.startswith("train.")]


class Servers:
    """Child servers, each the leader of its own process group, stopped together."""

    def __init__(self):
        self.children: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> None:
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - the child holds it for its life
        self.children.append((name, subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=out,
                                                     stderr=subprocess.STDOUT, start_new_session=True)))

    def wait_ready(self, urls: dict[str, str], timeout: float = 180) -> None:
        """Until every server answers its URL; a server that exits first is an error naming it."""
        deadline = time.monotonic() + timeout
        for name, url in urls.items():
            process = dict(self.children)[name]
            while True:
                try:
                    urllib.request.urlopen(url, timeout=2)
                    break
                except OSError:
                    if process.poll() is not None:
                        raise RuntimeError(f"{name} exited with status {process.returncode} before it answered "
                                           f"{url}") from None
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name} did not answer {url} within {timeout:.0f} s") from None
                    time.sleep(0.3)

    def exited(self) -> tuple[str, int] | None:
        return next(((n, p.returncode) for n, p in self.children if p.poll() is not None), None)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to every group, then SIGKILL to what is left after `grace` seconds."""
        for _, process in self.children:
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for _, process in self.children:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process.pid, signal.SIGKILL)  # the group's stragglers, even when the leader is gone
            process.wait()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def serve(folder: Path, port: int, optuna: bool, optuna_port: int, log=print) -> int:
    """Start the servers, print their URLs, and wait until one exits or this process is told to stop
    (SIGINT, SIGTERM); then stop them all. The exit status: 0 when told to stop, else the server's."""
    from coevo.search.stores import redact

    uri, artifacts, storage, experiment_id = prepare(folder)
    bin_dir = Path(sys.executable).parent
    servers = Servers()

    def on_signal(_signum, _frame):
        raise KeyboardInterrupt  # SIGTERM as Ctrl-C: one way out, through the clean-up below

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        remote = uri.startswith(("http://", "https://"))  # a tracking server is its own UI
        urls = {}
        if not remote:
            mlflow = [str(bin_dir / "mlflow"), "ui", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port",
                      str(port), "--workers", "1"] + (["--default-artifact-root", artifacts] if artifacts else [])
            servers.start("mlflow", mlflow, {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}, folder / "mlflow-ui.log")
            urls["mlflow"] = f"http://127.0.0.1:{port}/health"
        if optuna:
            servers.start("optuna-dashboard", [str(bin_dir / "optuna-dashboard"), storage, "--host", "127.0.0.1",
                                               "--port", str(optuna_port), "--quiet"], log=folder / "optuna-dashboard.log")
            urls["optuna-dashboard"] = f"http://127.0.0.1:{optuna_port}/api/meta"
        if not servers.children:
            raise RuntimeError(f"{folder}: its MLflow store is the tracking server {redact(uri)}, which serves its own "
                               f"UI: open {redact(mlflow_url(uri, experiment_id))} (add --optuna for optuna-dashboard)")
        log(f"starting the servers for {folder} (logs in {folder}: "
            + ", ".join(f"{name.replace('mlflow', 'mlflow-ui')}.log" for name, _ in servers.children) + ")")
        servers.wait_ready(urls)
        log(f"MLflow UI:        {redact(mlflow_url(uri if remote else f'http://127.0.0.1:{port}', experiment_id))}")
        if optuna:
            log(f"optuna-dashboard: http://127.0.0.1:{optuna_port}/dashboard/")
        log("Ctrl-C stops them.")
        sys.stdout.flush()
        while (gone := servers.exited()) is None:
            time.sleep(0.5)
        log(f"{gone[0]} exited with status {gone[1]}; stopping the others")
        return gone[1] or 1
    except KeyboardInterrupt:
        return 0
    finally:
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        servers.stop()
        log(f"stopped {', '.join(name for name, _ in servers.children) or 'nothing'}")
        for s, handler in previous.items():
            signal.signal(s, handler)


def mlflow_url(base: str, experiment_id: str) -> str:
    """The experiment's runs table in the saved view, in the UI's model-training mode (MLflow 3.17 picks
    GenAI or model training from this switch, not from the experiment's kind tag, once the switch shows)."""
    return (f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
            f"&viewStateShareKey={VIEW_KEY}")
