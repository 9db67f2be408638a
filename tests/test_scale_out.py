"""Scale-out on real servers: one `coevo search` owner and `--worker` processes sharing h-phases through a
throwaway PostgreSQL cluster (Optuna) and an MLflow server backed by it, under the faults that a run on
many machines meets: a worker killed with SIGKILL mid-trial, the owner killed and restarted, the database
restarted mid-phase, a worker or an owner started twice. Real processes, real signals, real sandboxes; the
policy is the synthetic harness-sensitive oracle, so trials take seconds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from search_helpers import ROOT, claim_race, write_config
from servers import PASSWORD, postgres_and_mlflow

TRIALS = 6


@pytest.fixture(scope="module")
def servers():
    with postgres_and_mlflow() as (cluster, tracking):
        yield cluster, tracking


class Run:
    """A search config on the shared servers, its processes (output in files, never a full pipe) and its
    study as the database holds it."""

    def __init__(self, tmp_path: Path, suite: Path, servers, name: str, trials: int = TRIALS):
        from coevo.search.study import make_storage

        self.cluster, self.tracking = servers
        self.tmp, self.name = tmp_path, name
        # `model`: a folder that exists, so no tiny model is built (the synthetic policy needs none).
        self.config = write_config(tmp_path, suite, name=name, pruning=False, arms=False, grace_period=5,
                                   storage=self.cluster.url(), tracking_uri=self.tracking, model=str(tmp_path),
                                   plan={"trials": trials, "dev_tasks": 6, "batches": 2, "test_tasks": 3},
                                   splits={"promotion": 6, "test": 6})
        self.run_dir, self.budget = tmp_path / "runs" / name, trials
        self.processes: list[subprocess.Popen] = []
        self.killed: list[subprocess.Popen] = []
        self.storage = make_storage(self.cluster.url(), 1, 60)

    def start(self, *args: str) -> subprocess.Popen:
        log = self.tmp / f"process{len(self.processes) + len(self.killed)}"
        with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
            process = subprocess.Popen([sys.executable, "-m", "coevo.cli", "search", *args], cwd=ROOT,
                                       stdout=out, stderr=err)
        process.log = log
        self.processes.append(process)
        return process

    def kill(self, process: subprocess.Popen) -> None:
        """SIGKILL, and stop watching it: its exit is the point, not a failure."""
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        self.processes.remove(process)
        self.killed.append(process)

    def output(self, process: subprocess.Popen) -> str:
        return Path(f"{process.log}.out").read_text() + Path(f"{process.log}.err").read_text()

    def trials(self):
        import optuna

        try:
            return optuna.load_study(study_name=f"{self.name}.h1", storage=self.storage).get_trials()
        except KeyError:  # the owner has not created the study yet
            return []

    def wait_for(self, what: str, condition, seconds: float = 120):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = condition(self.trials())
            if found:
                return found
            for p in self.processes:
                assert p.poll() in (None, 0), f"exited {p.returncode} before {what}:\n{self.output(p)[-3000:]}"
            time.sleep(0.1)
        pytest.fail(f"no {what} within {seconds} s")

    def finish(self, process: subprocess.Popen, seconds: float = 180) -> str:
        assert process.wait(seconds) == 0, self.output(process)[-3000:]
        return self.output(process)

    def close(self) -> None:
        for p in self.processes:
            if p.poll() is None:
                p.kill()
                p.wait(10)

    def check_done(self) -> list:
        """The run finished within its budget, and a killed trial was re-run at most once, with its
        parameters (not at all when the others filled the budget before it went stale)."""
        trials = self.trials()
        complete = [t for t in trials if t.state.name == "COMPLETE"]
        # Each process may start one trial while the last one is finishing: at most one over per worker.
        assert self.budget <= len(complete) <= self.budget + len(self.processes) + len(self.killed)
        for killed in (t for t in trials if t.state.name == "FAIL"):
            retries = [t for t in complete if t.system_attrs.get("failed_trial") == killed.number]
            assert len(retries) <= 1 and all(t.params == killed.params for t in retries), (killed.number, retries)
        assert json.loads((self.run_dir / "state.json").read_text())["done"]
        return trials


@pytest.fixture
def run(tmp_path, suite, servers):
    made = []

    def make(name: str, **kw) -> Run:
        made.append(Run(tmp_path, suite, servers, name, **kw))
        return made[-1]

    yield make
    for r in made:
        r.close()


def running_in(trials, worker: str | None):
    """A trial that `worker` (None: the owner) is running, past its first dev batch."""
    return next((t for t in trials if t.state.name == "RUNNING" and t.intermediate_values
                 and t.user_attrs.get("worker", "").rsplit(":", 1)[-1] == (worker or "")), None)


def test_a_worker_killed_mid_trial_has_its_trial_retried_and_counted_once(run):
    from mlflow import MlflowClient

    r = run("killedworker", trials=10)  # room left for the retry once the trial is found dead
    worker = r.start(str(r.config), "--worker")  # before the owner: it waits for the run to start
    owner = r.start(str(r.config))
    victim = r.wait_for("trial of the worker", lambda trials: running_in(trials, str(worker.pid)))
    r.kill(worker)
    out = r.finish(owner)
    trials = r.check_done()
    assert next(t for t in trials if t.number == victim.number).state.name == "FAIL"
    assert sum(t.state.name == "FAIL" for t in trials) == 1
    # The owner, still short of the budget, re-ran it: once, with its parameters.
    assert [t.params for t in trials if t.system_attrs.get("failed_trial") == victim.number] == [victim.params]
    # The password in the storage URL reaches no log and no MLflow param.
    assert PASSWORD not in out + r.output(worker)
    client = MlflowClient(r.tracking)
    parent = client.search_runs([client.get_experiment_by_name("killedworker").experiment_id],
                                "tags.phase = 'search'")[0]
    assert parent.data.params["config.storage"] == r.cluster.url().replace(PASSWORD, "***")
    assert PASSWORD not in json.dumps(parent.data.params)
    # Its MLflow run does not stay RUNNING: whoever found the trial dead ended it.
    experiment = client.get_experiment_by_name("killedworker").experiment_id
    runs = client.search_runs([experiment], f"tags.trial = '{victim.number}'")
    assert [found.info.status for found in runs] == ["KILLED"]


def test_the_owner_killed_and_restarted_resumes_and_a_second_owner_is_refused(run):
    r = run("killedowner")
    owner = r.start(str(r.config))
    worker = r.start(str(r.config), "--worker")
    r.wait_for("trial of the owner", lambda trials: running_in(trials, None)
               and sum(t.state.name == "COMPLETE" for t in trials) >= 2)
    r.kill(owner)
    resumed = r.start("--resume", str(r.run_dir))
    r.wait_for("resumed owner", lambda _: (r.run_dir / "owner.lock").read_text().startswith(f"pid {resumed.pid} "))
    second = r.start("--resume", str(r.run_dir))
    assert second.wait(180) == 2
    assert f"owned by pid {resumed.pid} on" in r.output(second)
    r.finish(resumed)
    r.finish(worker)
    trials = r.check_done()
    assert sum(t.state.name == "FAIL" for t in trials) == 1  # the owner's trial, found dead


def test_the_database_restarted_mid_phase_and_a_duplicate_worker_are_harmless(run):
    r = run("dbrestart")
    # The same command twice, before the owner, so that they wait for the run and claim trials from its
    # start: started after it, slow imports could let the owner run the whole phase alone.
    workers = [r.start(str(r.config), "--worker") for _ in range(2)]
    owner = r.start(str(r.config))
    r.wait_for("two finished trials and one running in a worker",
               lambda trials: sum(t.state.name == "COMPLETE" for t in trials) >= 2
               and any(running_in(trials, str(w.pid)) for w in workers))
    r.cluster.stop()
    time.sleep(2)  # down for a while: calls in flight fail, and wait for it
    r.cluster.start()
    r.finish(owner)
    ran = [int(r.finish(w).split("worker done: ran ")[1].split()[0]) for w in workers]
    trials = r.check_done()
    assert sum(ran) >= 1
    assert not [t.user_attrs["error"] for t in trials if "error" in t.user_attrs]  # no trial scored 0 for it
    assert not [t for t in trials if t.state.name == "FAIL"]  # no heartbeat went stale either


def test_an_enqueued_trial_is_claimed_by_exactly_one_worker_on_postgresql(servers):
    assert claim_race(servers[0].url()) == [1] * 10


def test_bad_store_urls_name_the_flag_and_what_is_valid_and_hide_the_password(tmp_path, suite):
    result = subprocess.run([sys.executable, "-m", "coevo.cli", "search", str(write_config(tmp_path, suite)),
                             "--storage", f"postgres://me:{PASSWORD}@db/optuna"], cwd=ROOT, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "storage (--storage) 'postgres://me:***@db/optuna': unknown scheme 'postgres'" in message
    assert "valid: sqlite:///PATH, postgresql://USER@HOST:PORT/DB" in message and PASSWORD not in message
    from coevo.search.config import load_config
    from coevo.search.errors import SearchError

    for field, value, problem in [("storage", "postgresql:///optuna", "needs a host and a database"),
                                  ("storage", "sqlite:///", "needs a file path"),
                                  ("tracking_uri", "ftp://host/x", "unknown scheme 'ftp'")]:
        with pytest.raises(SearchError, match=problem):
            load_config(write_config(tmp_path, suite, **{field: value}))


def test_the_scale_out_example_config_loads_and_trl_vllm_server_options_reach_grpo(tmp_path):
    """In config only (README: Scale-out): the vLLM server options reach TRL's GRPOConfig unchanged."""
    from coevo.harness import load_harness
    from coevo.search.config import load_config
    from coevo.train.grpo import grpo_config
    from coevo.train.spec import spec_from_dict

    config = load_config(ROOT / "search_spaces" / "scale_out.yaml")
    assert config.storage.startswith("postgresql://") and config.tracking_uri.startswith("http://")
    vllm = {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": "http://gpu0:8000"}
    spec = spec_from_dict({**config.train, "trl": vllm}, "scale_out.yaml: train")
    args = grpo_config(spec, load_harness(config.harness), tmp_path)
    assert (args.use_vllm, args.vllm_mode, args.vllm_server_base_url) == (True, "server", "http://gpu0:8000")


def test_coevo_check_reaches_the_servers_and_names_one_that_does_not_answer(servers):
    from coevo.search.stores import probe_server

    cluster, tracking = servers
    assert probe_server(cluster.url()).endswith("connected") and PASSWORD not in probe_server(cluster.url())
    assert probe_server(tracking).endswith("answers (HTTP 200)")
    wrong = cluster.url().replace(PASSWORD, "wrong-pw")
    with pytest.raises(ValueError, match="cannot reach it: .*password authentication failed") as failed:
        probe_server(wrong)
    assert "wrong-pw" not in str(failed.value)


def test_coevo_ui_on_a_tracking_server_links_its_ui_and_starts_only_optuna_dashboard(servers, tmp_path):
    """A run whose store is an MLflow server: that server is the UI (coevo ui starts no second one and
    prints the server's URL); --optuna starts optuna-dashboard on the run's PostgreSQL storage."""
    import optuna
    import yaml
    from mlflow import MlflowClient
    from servers import free_port

    from coevo.search.stores import engine_url

    cluster, tracking = servers
    folder = tmp_path / "ui-remote"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"name": "ui-remote", "tracking_uri": tracking,
                                                        "storage": cluster.url()}))
    experiment = MlflowClient(tracking).create_experiment("ui-remote")
    optuna.create_study(study_name="ui-remote-h1", storage=engine_url(cluster.url()))
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "coevo.cli", "ui", str(folder), "--optuna", "--optuna-port",
                                str(port)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, deadline = [], time.monotonic() + 300
    while time.monotonic() < deadline and not any(line.startswith("optuna-dashboard:") for line in lines):
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
    out = "".join(lines)
    assert f"MLflow UI:        {tracking.rstrip('/')}/#/experiments/{experiment}/runs" in out, out
    assert not (folder / "mlflow-ui.log").exists() and PASSWORD not in out
    import urllib.request

    assert b"ui-remote-h1" in urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=30).read()
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
