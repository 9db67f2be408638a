"""The red-team suite (tests/redteam.py) against the local backend, plus what only it can show:
its temporary folders, a parent killed with SIGKILL, and many sandboxes at once."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from redteam import PROBES, REPO, TAMPER, RedTeam, pid_names, running

from coevo.sandbox import local, make_sandbox

PARALLEL = int(os.environ.get("COEVO_REDTEAM_PARALLEL", "8"))  # 32 for the full run; 8 keeps CI short


@pytest.fixture(scope="module")
def redteam(tmp_path_factory):
    yield from RedTeam.targets(tmp_path_factory.mktemp("redteam"))


def pytest_generate_tests(metafunc):
    if "probe" in metafunc.fixturenames:
        metafunc.parametrize("probe", PROBES, ids=[f"{p.category}:{p.name}" for p in PROBES])
    if "tamper" in metafunc.fixturenames:
        metafunc.parametrize("tamper", list(TAMPER))


class TestLocalRedTeam(RedTeam):
    def start_sandbox(self, task):
        box = make_sandbox(task, backend="local", timeout=20)
        box.start()
        return box


def test_the_suite_is_the_size_the_issue_asks_for():
    by_category = {c: sum(p.category == c for p in PROBES) for c in ("fs", "net", "proc", "secret")}
    assert len(PROBES) + len(TAMPER) >= 40
    assert by_category["fs"] >= 16 and by_category["net"] >= 12 and by_category["proc"] >= 6
    assert by_category["secret"] >= 1 and len(TAMPER) >= 8


@pytest.mark.parametrize("control", [p for p in PROBES if p.control], ids=lambda p: f"{p.category}:{p.name}")
def test_each_control_probe_breaches_on_the_host(redteam, control):
    """What a probe looks for is really there: on the host, outside any sandbox, it breaches."""
    if control.needs_root and os.geteuid() != 0:
        pytest.skip("the host side of this control needs root")
    _, targets = redteam
    result = subprocess.run(["bash", "-c", control.command.format(**targets.fields())], capture_output=True,
                            text=True, timeout=30, check=False)
    assert result.returncode == 0, f"{control.name}: finds nothing even on the host: {result.stderr[-500:]}"


def test_parallel_sandboxes_leave_no_process_mount_or_folder(redteam):
    from coevo.verify import verify

    task, _ = redteam
    mark = f"coevo-par-{secrets.token_hex(4)}"
    mounts_before = Path("/proc/self/mountinfo").read_text()
    mine = f"{local.WORKSPACE_PREFIX}{os.getpid()}-*"  # other processes may be making sandboxes too
    folders_before = set(Path(tempfile.gettempdir()).glob(mine))

    def episode(i: int) -> float:
        box = make_sandbox(task)
        box.start()
        box.run(f"(bash -c 'exec -a {mark} sleep 1000' &); echo {i} > /app/n")
        return verify(task, box).reward

    with ThreadPoolExecutor(PARALLEL) as pool:
        rewards = list(pool.map(episode, range(PARALLEL)))
    assert rewards == [0.0] * PARALLEL
    assert not [cmd for cmd in pid_names().values() if mark in cmd]
    assert Path("/proc/self/mountinfo").read_text() == mounts_before
    assert set(Path(tempfile.gettempdir()).glob(mine)) == folders_before


KILLED_PARENT = """
import sys, time
from coevo.sandbox.local import LocalSandbox
box = LocalSandbox()
box.start()
box.run("(bash -c 'exec -a {mark} sleep 1000' &); nohup setsid bash -c 'exec -a {mark} sleep 1000' >/dev/null 2>&1 &")
print(box.workspace, flush=True)
time.sleep(600)
"""


def test_a_parent_killed_with_sigkill_leaves_no_process_and_its_folder_is_swept():
    mark = f"coevo-killed-{secrets.token_hex(4)}"
    parent = subprocess.Popen([sys.executable, "-c", KILLED_PARENT.replace("{mark}", mark)], cwd=REPO,
                              stdout=subprocess.PIPE, text=True)
    workspace = Path(parent.stdout.readline().strip())
    assert workspace.is_dir() and len(running(mark, 2, exclude=parent.pid)) == 2
    parent.kill()
    parent.wait()
    assert running(mark, 0, within=5) == []  # bwrap's --die-with-parent ends the whole pid namespace
    assert workspace.is_dir()  # nobody could remove it: the next process's first sandbox does
    subprocess.run([sys.executable, "-c", "from coevo.sandbox.local import LocalSandbox; LocalSandbox().close()"],
                   cwd=REPO, check=True)
    assert not workspace.exists()


def _files_holding(text: str, *roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_a_canary_api_key_reaches_no_trajectory_store_or_bundle(redteam, suite, tmp_path):
    """With a key in the host environment, an agent that dumps its environment, a whole search, its
    MLflow and Optuna stores (episode traces included) and the exported bundle: the key is nowhere."""
    from search_helpers import write_config

    from coevo.harness import load_harness, render_action
    from coevo.policy.scripted import ScriptedPolicy
    from coevo.rollout import rollout, save_trajectories
    from coevo.search.config import load_config
    from coevo.search.run import Search

    task, targets = redteam
    assert os.environ["OPENAI_API_KEY"] == targets.key
    harness = load_harness(REPO / "harnesses" / "mini_bash.yaml")
    dump = render_action(harness, ["env; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; echo $OPENAI_API_KEY"],
                         submit=False)
    trajectories = rollout([task], harness, ScriptedPolicy([dump, render_action(harness, [], submit=True)]))
    assert "PATH=" in str(trajectories[0].messages)  # the dump ran and its output was recorded
    save_trajectories(tmp_path / "trajectories.jsonl", trajectories)
    config = load_config(write_config(tmp_path, suite, plan={"trials": 2, "dev_tasks": 4, "batches": 1}))
    Search(config, log=lambda line: None).run()
    from coevo.search.tracking import Tracker, default_uri

    tracker = Tracker(default_uri(config.run_dir), config.name, config.run_dir / "mlartifacts")
    run_id = tracker.start("env dump")
    assert tracker.episodes(run_id, trajectories, 1) == 1  # the dump as a trace, beside the search's own
    [dumped] = tracker.client.search_traces(locations=[tracker.experiment_id], run_id=run_id)
    assert "PATH=" in str([span.outputs for span in dumped.data.spans])
    assert len(tracker.client.search_traces(locations=[tracker.experiment_id], max_results=1000)) > 1
    subprocess.run([sys.executable, "-m", "coevo.cli", "export", str(config.run_dir), "--out",
                    str(tmp_path / "bundle")], cwd=REPO, check=True, capture_output=True)
    assert (tmp_path / "bundle" / "report.json").is_file() and (config.run_dir / "mlflow.db").is_file()
    assert _files_holding(targets.key, tmp_path) == []
