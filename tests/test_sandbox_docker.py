"""The sandbox contract against the docker backend, plus what is specific to it: image builds (cache,
per-hash lock, failures), Harbor-format tasks that need a build, many episodes at once, and the
containers of a killed run.

Everything runs against a real engine. There is no skip: without an engine these tests fail with the
message that says how to start one (.ci/setup starts it).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from redteam import RedTeam
from sandbox_contract import SandboxContract

from coevo.errors import NeedsDockerError, SandboxError, SandboxUnavailableError
from coevo.sandbox import choose_backend, make_sandbox
from coevo.sandbox.docker_io import LABEL, cleanup_orphans, docker_client
from coevo.sandbox.images import BASE_TAG, ImageBuildError, ensure_image
from coevo.tasks import load_task
from coevo.verify import verify

# Nothing can be pulled here: every FROM in these tests is the base built by `coevo sandbox base`.
IMAGE_MAP = {"debian:bookworm-slim": BASE_TAG, "python:3.12-slim": BASE_TAG}
FIXTURE = Path(__file__).parent / "fixtures" / "harbor-apt-pip-user"
REPO = Path(__file__).resolve().parents[1]


def docker_sandbox(task, **options):
    return make_sandbox(task, backend="docker", image_map=IMAGE_MAP, timeout=20, **options)


def unique_task(make_task, dockerfile: str, name: str = "fresh"):
    """A task whose context no earlier run has built (a random file in it)."""
    folder = make_task(name, dockerfile=dockerfile, files={"environment/app/nonce.txt": secrets.token_hex(8)})
    return load_task(folder)


def remove_image(tag: str) -> None:
    docker_client().images.remove(tag, force=True)


class TestDockerSandbox(SandboxContract):
    @pytest.fixture
    def sandbox(self, task):
        sandbox = docker_sandbox(task)
        sandbox.start()
        yield sandbox
        sandbox.close()

    def host_leftovers(self, sandbox) -> list[Path]:
        root = Path(docker_client().info()["DockerRootDir"])
        return [root / "containers" / sandbox.container.id]


def test_container_is_locked_down(task):
    with docker_sandbox(task) as sandbox:
        config = sandbox.container.attrs["HostConfig"]
        assert config["NetworkMode"] == "none" and config["CapDrop"] == ["ALL"]
        assert config["SecurityOpt"] == ["no-new-privileges"] and config["PidsLimit"] == 256
        assert config["Memory"] == 1024 << 20 and config["NanoCpus"] == 10**9  # task.toml: 1 cpu, 1G
        assert sandbox.container.labels["coevo.task"] == task.name and "coevo.episode" in sandbox.container.labels
        status = sandbox.run("grep -E '^(CapEff|NoNewPrivs)' /proc/self/status").output.split()
        assert status == ["CapEff:", "0000000000000000", "NoNewPrivs:", "1"]


def test_stop_kills_everything_and_start_is_a_fresh_session(task):
    with docker_sandbox(task) as sandbox:
        sandbox.run("cd /tmp && export X=1 && echo kept > /app/kept && echo gone > /tmp/gone && sleep 1000 &")
        sandbox.stop()
        sandbox.start()
        after = sandbox.run("pwd; echo X=$X; cat /app/kept; ls /tmp; pgrep -c -u \"$(id -u)\" sleep || true")
        assert after.output == "/app\nX=\nkept\n0\n"


def test_second_build_builds_nothing(make_task):
    task = unique_task(make_task, "FROM debian:bookworm-slim\nRUN echo built > /built\nCOPY app/ /app/\n")
    first = ensure_image(docker_client(), task, IMAGE_MAP)
    try:
        again = ensure_image(docker_client(), load_task(task.path), IMAGE_MAP)
        assert first.built and not again.built and first.tag == again.tag
        assert first.tag.startswith("coevo-env:")
    finally:
        remove_image(first.tag)


def test_parallel_starts_build_once(make_task):
    task = unique_task(make_task, "FROM debian:bookworm-slim\nRUN sleep 1\nCOPY app/ /app/\n")
    with ThreadPoolExecutor(8) as pool:
        images = list(pool.map(lambda _: ensure_image(docker_client(), task, IMAGE_MAP), range(8)))
    try:
        assert sum(image.built for image in images) == 1 and len({image.tag for image in images}) == 1
    finally:
        remove_image(images[0].tag)


def test_failed_build_names_the_task_and_line_and_quotes_the_log(make_task):
    task = unique_task(make_task, "FROM debian:bookworm-slim\nWORKDIR /app\n"
                                  "RUN echo about to fail && exit 7\n", name="broken")
    with pytest.raises(ImageBuildError) as info:
        docker_sandbox(task)
    message = str(info.value)
    assert "task broken" in message and "Dockerfile, line 3: RUN echo about to fail" in message
    assert "about to fail" in message.split("build log:")[1] and "returned a non-zero code: 7" in message
    assert isinstance(info.value, SandboxError)  # the rollout records it as 'sandbox_error'


def _check(task, backend_options: dict) -> tuple[float, float]:
    """(oracle reward, do-nothing reward), the way `coevo tasks check` runs them."""
    rewards = []
    for commands in ("bash /solution/solve.sh", None):
        sandbox = docker_sandbox(task, **backend_options)
        if commands:
            sandbox.upload(task.path / "solution", "/solution")
        sandbox.start()
        if commands:
            sandbox.run(commands, timeout=120)
        rewards.append(verify(task, sandbox).reward)
    return rewards[0], rewards[1]


def test_harbor_task_with_apt_pip_and_user_builds_and_verifies(tmp_path):
    folder = shutil.copytree(FIXTURE, tmp_path / FIXTURE.name)
    for sub in ("tests", "solution"):  # as in the issue: private, root-owned task folders
        os.chmod(folder / sub, 0o700)
    task = load_task(folder)
    assert _check(task, {}) == (1.0, 0.0)
    with docker_sandbox(task) as sandbox:
        assert sandbox.run("id -un; pwd; ls /tests /solution 2>&1 | head -1").output.startswith("agent\n/app\n")
    with pytest.raises(NeedsDockerError, match=r"needs the docker backend:\n  line 3: RUN apt-get"):
        make_sandbox(task, backend="local")
    assert choose_backend(task) == "docker"


def test_bundled_style_task_chooses_local_and_docker_still_runs_it(task):
    assert choose_backend(task) == "local"
    assert _check(task, {}) == (1.0, 0.0)


def test_no_engine_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailableError, match="dockerd --iptables=false"):
        docker_client.__wrapped__()


def test_sixteen_parallel_episodes_finish(task):
    def episode(i: int) -> float:
        sandbox = docker_sandbox(task)
        sandbox.start()
        sandbox.run(f"echo {42 if i % 2 == 0 else 41} > /app/answer.txt")
        return verify(task, sandbox).reward

    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        rewards = list(pool.map(episode, range(16)))
    assert rewards == [1.0, 0.0] * 8, rewards
    assert time.monotonic() - started < 120


CHILD = """
import sys, time
sys.path.insert(0, {tests!r})
from test_sandbox_docker import docker_sandbox
from coevo.tasks import load_task
boxes = [docker_sandbox(load_task({task!r}), run_id={run!r}) for _ in range(3)]
for box in boxes:
    box.start()
    box.run("sleep 1000 &")
print("ready", flush=True)
time.sleep(600)
"""


def test_containers_of_a_killed_run_are_removed_when_coevo_starts_again(task):
    run = f"killed-{secrets.token_hex(4)}"
    code = CHILD.format(tests=str(Path(__file__).parent), task=str(task.path), run=run)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert child.stdout.readline().strip() == "ready"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    labelled = {"label": [LABEL, f"coevo.run={run}"]}
    assert len(docker_client().containers.list(all=True, filters=labelled)) == 3  # left behind
    again = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_sandbox_docker import docker_sandbox
        from coevo.tasks import load_task
        docker_sandbox(load_task({str(task.path)!r})).close()
    """)
    subprocess.run([sys.executable, "-c", again], check=True, cwd=REPO)
    assert docker_client().containers.list(all=True, filters=labelled) == []


def test_prune_command_removes_orphans_and_keeps_live_ones(task):
    from typer.testing import CliRunner

    from coevo.cli import app

    with docker_sandbox(task) as live:
        assert "removed 0 container" in CliRunner().invoke(app, ["sandbox", "prune"]).output
        live.container.reload()
        assert live.container.status == "running"
    assert cleanup_orphans(docker_client()) == []


def test_prune_while_other_episodes_come_and_go(task):
    """Orphan cleanup at start runs while other runs open and close containers: one that vanishes
    between the listing and its inspection (or its removal) is not an error."""
    def churn(_):
        for _ in range(6):
            with docker_sandbox(task) as box:
                box.run("true")

    with ThreadPoolExecutor(max_workers=3) as pool:
        churning = [pool.submit(churn, i) for i in range(2)]
        while not all(f.done() for f in churning):
            cleanup_orphans(docker_client())
        for f in churning:
            f.result()


# -- the red-team suite (tests/redteam.py), against the docker backend --------------------------------
@pytest.fixture(scope="module")
def redteam(tmp_path_factory):
    from redteam import RedTeam

    yield from RedTeam.targets(tmp_path_factory.mktemp("redteam"))


# Probes written for the local backend's root (the host's system folders only). In a container the
# root is the image's own, so these find the image's folders, not the host's; checked differently below.
IMAGE_OWN = {
    "host-only top-level folders": "the image's own /srv, /opt, /mnt ...",
    "/root or /home": "the image's own, empty",
    "/var of the host": "the image's own /var",
    "/sys": "the container's read-only sysfs; its network namespace has only lo",
    "any capability": "the bounding set keeps CAPS for the harness's root execs; the agent's "
                      "effective and permitted sets are empty and no-new-privileges stops any gain",
}


def pytest_generate_tests(metafunc):
    from redteam import PROBES, TAMPER

    if "probe" in metafunc.fixturenames:
        probes = [p for p in PROBES if p.name not in IMAGE_OWN]
        metafunc.parametrize("probe", probes, ids=[f"{p.category}:{p.name}" for p in probes])
    if "tamper" in metafunc.fixturenames:
        metafunc.parametrize("tamper", list(TAMPER))


class TestDockerRedTeam(RedTeam):
    def start_sandbox(self, task):
        box = docker_sandbox(task)
        box.start()
        return box


def test_what_the_image_own_probes_find_is_the_containers(task):
    with docker_sandbox(task) as sandbox:
        found = sandbox.run("ls /sys/class/net; ls -A /home | wc -l; grep -E '^Cap(Eff|Prm)' /proc/self/status")
        assert found.output.split() == ["lo", "0", "CapPrm:", "0000000000000000", "CapEff:", "0000000000000000"]
        assert sandbox.run("touch /sys/x || touch /root/x || touch /var/x").exit_code != 0
