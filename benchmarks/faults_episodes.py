"""Faults inside episodes, for benchmarks/faults.py: verifiers that hang, crash or write a bad reward; agent
commands that fork-bomb, eat memory or flood the output; a sandbox killed from the host (bubblewrap and
docker); a docker daemon stopped mid-episode; models that answer empty, endless or broken text, or go
away; corrupt checkpoints, bundles and run state on load. Each is injected into `coevo eval` (a
subprocess) or into the rollout engine itself, on small task folders written here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import TASK_TOML, write_task
from fault_kit import REPO, Env, Row, coevo_run, no_traceback, wait_for

HARNESS = REPO / "harnesses" / "mini_bash.yaml"
FAULTS = []


def fault(function):
    FAULTS.append(function)
    return function


def read_trajectories(path: Path) -> dict[str, dict]:
    """task name -> its trajectory record, from an eval's JSONL."""
    if not path.exists():
        return {}
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["task"]: r for r in records}


def eval_tasks(folder: Path, tasks: dict[str, dict], model: str = "oracle", extra: tuple = (), env=None,
               timeout: float = 600):
    """`coevo eval` over task folders written from `tasks` (name -> write_task options): (result, records)."""
    for name, options in tasks.items():
        write_task(folder / "tasks", name, **options)
    out = folder / "out.jsonl"
    result = coevo_run("eval", "--model", model, "--harness", str(HARNESS), "--tasks", str(folder / "tasks"),
                       "--split", "all", "--json", "--out", str(out), *extra, timeout=timeout, env=env)
    return result, read_trajectories(out)


def outcome(record: dict | None) -> str:
    if record is None:
        return "no trajectory"
    parts = [f"status {record.get('status')}", f"reward {record.get('reward')}"]
    if record.get("verify_error"):
        parts.append(record["verify_error"][:90])
    elif record.get("error"):
        parts.append(record["error"][:90])
    return "; ".join(parts)


# -- verifiers and agent commands, through `coevo eval` -----------------------------------------------
FAST_VERIFIER = TASK_TOML.replace("timeout_sec = 20.0", "timeout_sec = 5.0")
HUGE = "head -c 200000000 /dev/zero | tr '\\0' ' ' > /logs/verifier/reward.json; echo 1 > /dev/null\n"
EPISODE_FAULTS = {
    "verifier hangs": ("tests/test.sh", {"test_sh": "#!/bin/bash\nsleep 600\n", "task_toml": FAST_VERIFIER},
                       lambda r: "VerifierTimeout" in (r.get("verify_error") or "")),
    "verifier crashes (no reward written)": ("tests/test.sh", {"test_sh": "#!/bin/bash\nkill -SEGV $$\n"},
                                             lambda r: "neither" in (r.get("verify_error") or "")),
    "verifier writes malformed reward.json": (
        "tests/test.sh", {"test_sh": "#!/bin/bash\necho '{\"reward\": 1.0,' > /logs/verifier/reward.json\n"},
        lambda r: "not valid JSON" in (r.get("verify_error") or "")),
    "verifier writes a 200 MB reward.json": ("tests/test.sh", {"test_sh": "#!/bin/bash\n" + HUGE},
                                            lambda r: bool(r.get("verify_error")) and r.get("reward") == 0),
    "verifier writes reward NaN": ("tests/test.sh", {"test_sh": "#!/bin/bash\necho nan > /logs/verifier/reward.txt\n"},
                                   lambda r: "out of range" in (r.get("verify_error") or "")),
    "agent command fork-bombs": ("solution/solve.sh", {"solve_sh": "bash -c ':(){ :|:& };:'\necho 42 > /app/answer.txt\n"},
                                 lambda r: r.get("status") is not None),
    "agent command allocates 8 GB": ("solution/solve.sh", {
        "solve_sh": "python3 -c 'x = bytearray(8 << 30)'\necho 42 > /app/answer.txt\n"},
        lambda r: r.get("reward") == 1.0),
    "agent command prints 50 MB": ("solution/solve.sh", {"solve_sh": "yes | head -c 50000000\necho 42 > /app/answer.txt\n"},
                                   lambda r: r.get("reward") == 1.0),
}


@fault
def verifiers_and_commands(env: Env) -> list[Row]:
    """One `coevo eval` over a task per fault plus a healthy one: each fault is that episode's data only."""
    folder = env.folder("episodes")
    tasks = {f"f{i}": options for i, (_, (_, options, _)) in enumerate(EPISODE_FAULTS.items())}
    tasks["healthy"] = {}
    started = time.monotonic()
    result, records = eval_tasks(folder, tasks)
    seconds = time.monotonic() - started
    finished = result.returncode == 0 and no_traceback(result.stdout + result.stderr)
    healthy = records.get("healthy", {}).get("reward") == 1.0
    rows = []
    for i, (name, (where, _, expected)) in enumerate(EPISODE_FAULTS.items()):
        record = records.get(f"f{i}")
        ok = finished and healthy and record is not None and expected(record)
        what = "nothing (a verifier error: scored 0 with its cause, not as a failed task)" if "verifier" in name else \
            "nothing (contained; the episode went on and passed)"
        rows.append(Row(name, f"coevo eval: a task's {where}", ok, what if ok else "?", None,
                        outcome(record) + ("" if finished else f"; eval: {(result.stderr or result.stdout)[-300:]}")))
    rows[-1].note += f"; the eval of {len(tasks)} tasks took {seconds:.0f} s, the healthy task passed: {healthy}"
    return rows


# -- a sandbox killed from the host ---------------------------------------------------------------------
def _pids_with(mark: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if mark.encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


def _ancestor(pid: int, name: str) -> int | None:
    """The nearest ancestor of `pid` (itself included) whose command is `name` (bwrap, containerd-shim...)."""
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if stat.split("(", 1)[1].split(")", 1)[0].startswith(name):
            return pid
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return None


def killed_sandbox_rollout(backend: str, kill, image_map=None) -> tuple[list, float, float]:
    """Two episodes in one rollout; the first one's sandbox is killed (by `kill(mark)`) while its command
    runs. Returns (trajectories, seconds from the kill to the rollout's end, seconds of the whole)."""
    from coevo.harness import load_harness, render_action
    from coevo.policy.scripted import ScriptedPolicy
    from coevo.rollout import rollout
    from coevo.tasks import load_task

    root = Path(os.environ.get("COEVO_FAULTS_TMP", "/var/tmp"))
    mark = f"coevo-fault-{os.getpid()}-{time.monotonic_ns()}"
    folder = root / mark
    tasks = [load_task(write_task(folder, name)) for name in ("victim", "bystander")]
    harness = load_harness(HARNESS).with_overrides({"limits.command_timeout_s": 60, "limits.max_turns": 3})

    def reply(request, turn):
        victim = "victim" in request.meta.get("task", "")
        if turn == 0:
            command = f"(exec -a {mark} sleep 20)" if victim else "sleep 5"
            return render_action(harness, [f"{command}; echo 42 > /app/answer.txt"], submit=False)
        return render_action(harness, [], submit=True)

    killed_at = []

    def killer():
        wait_for(lambda: _pids_with(mark), 120, "the victim's command")
        time.sleep(1)
        killed_at.append(time.monotonic())
        kill(mark)

    thread = threading.Thread(target=killer, daemon=True)
    started = time.monotonic()
    thread.start()
    trajectories = rollout(tasks, harness, ScriptedPolicy(reply), backend=backend, image_map=image_map)
    thread.join(5)
    shutil.rmtree(folder, ignore_errors=True)
    end = time.monotonic()
    return trajectories, end - killed_at[0] if killed_at else float("nan"), end - started


def _rollout_row(name: str, where: str, trajectories: list, recover: float) -> Row:
    victim, bystander = trajectories
    ok = victim.status is not None and victim.reward == 0 and bystander.reward == 1.0
    cause = victim.error or "its shell was restarted and the episode went on; its command died, so reward 0"
    note = f"victim: status {victim.status}: {cause}"[:170] + f"; bystander reward {bystander.reward}"
    return Row(name, where, ok, "in flight: the victim's episode (scored 0, recorded with its cause)" if ok else "?",
               recover, note)


@fault
def sandbox_killed(env: Env) -> list[Row]:
    import signal

    def kill_bwrap(mark):
        for pid in _pids_with(mark):
            box = _ancestor(pid, "bwrap")
            if box:
                os.kill(box, signal.SIGKILL)

    trajectories, recover, _ = killed_sandbox_rollout("local", kill_bwrap)
    return [_rollout_row("sandbox process killed (SIGKILL to its bwrap)", "rollout engine, local backend, mid-command",
                         trajectories, recover)]


@fault
def container_killed(env: Env) -> list[Row]:
    from coevo.sandbox.docker_io import docker_client
    from coevo.sandbox.images import BASE_TAG

    def kill_container(mark):
        for container in docker_client().containers.list(filters={"label": "coevo.task=victim"}):
            container.kill()

    trajectories, recover, _ = killed_sandbox_rollout("docker", kill_container,
                                                      image_map={"debian:bookworm-slim": BASE_TAG})
    return [_rollout_row("docker container killed (docker kill)", "rollout engine, docker backend, mid-command",
                         trajectories, recover)]


DOCKERD_SCRIPT = r"""
import json, os, signal, subprocess, sys, time
sys.path[:0] = [sys.argv[1] + "/benchmarks", sys.argv[1] + "/tests"]
from faults_episodes import killed_sandbox_rollout
from coevo.sandbox.images import BASE_TAG

pidfile, start = sys.argv[2], json.loads(sys.argv[3])

def stop_daemon(mark):
    os.kill(int(open(pidfile).read()), signal.SIGKILL)

def dead(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True

first, recover, _ = killed_sandbox_rollout("docker", stop_daemon, image_map={"debian:bookworm-slim": BASE_TAG})
restarted = time.monotonic()
# The daemon's containerd dies with it, but this machine's init reaps orphans late: until then its zombie
# makes the new daemon take it for a live containerd and wait for a socket that is gone. A dead pid's
# pidfile is what an init that reaps would have left behind, so it goes.
containerd = __import__("pathlib").Path(pidfile).parent / "exec" / "containerd" / "containerd.pid"
for _ in range(100):
    if not containerd.exists() or dead(containerd.read_text().strip() or 0):
        break
    time.sleep(0.1)
if containerd.exists() and dead(containerd.read_text().strip() or 0):
    containerd.unlink()
subprocess.Popen(start, stdout=open(pidfile + ".log", "ab"), stderr=subprocess.STDOUT, start_new_session=True)
from coevo.sandbox.docker_io import docker_client
for _ in range(300):
    try:
        docker_client.cache_clear(); docker_client(); break
    except Exception:
        time.sleep(0.2)
from coevo.harness import load_harness
from coevo.policy import make_policy
from coevo.rollout import rollout
from coevo.tasks import load_task
from conftest import write_task
task = load_task(write_task(__import__("pathlib").Path(pidfile).parent / "after", "after"))
harness = load_harness(sys.argv[1] + "/harnesses/mini_bash.yaml")
again = rollout([task], harness, make_policy("oracle", harness=harness, tasks=[task]), backend="docker",
                image_map={"debian:bookworm-slim": BASE_TAG})
print(json.dumps({"first": [[t.status, t.reward, (t.error or "")[:120]] for t in first],
                  "again": again[0].reward, "again_error": (again[0].error or again[0].verify_error or "")[:200],
                  "recover": time.monotonic() - restarted}))
"""


def private_dockerd(folder: Path) -> tuple[list[str], Path, str]:
    """A docker daemon of this benchmark's own (its socket, data and exec roots), so that stopping it stops
    nobody else's containers; loaded with coevo's base image. Returns (its command, pidfile, DOCKER_HOST)."""
    socket = folder / "docker.sock"
    pidfile = folder / "dockerd.pid"
    command = ["dockerd", "--iptables=false", "--ip-forward=false", "--bridge=none", "-H", f"unix://{socket}",
               "--data-root", str(folder / "data"), "--exec-root", str(folder / "exec"), "--pidfile", str(pidfile)]
    with open(folder / "dockerd.log", "ab") as log:
        daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    # Reaped the moment it dies: a SIGKILLed daemon left a zombie here, and its restart then refused to
    # start over the pidfile of a process that still "exists".
    threading.Thread(target=daemon.wait, daemon=True).start()
    host = f"unix://{socket}"
    wait_for(lambda: subprocess.run(["docker", "-H", host, "info"], capture_output=True,
                                    check=False).returncode == 0, 120,
             "the private docker daemon")
    from coevo.sandbox.images import BASE_TAG

    save = subprocess.Popen(["docker", "save", BASE_TAG], stdout=subprocess.PIPE)
    subprocess.run(["docker", "-H", host, "load"], stdin=save.stdout, check=True, capture_output=True)
    save.wait()
    return command, pidfile, host


@fault
def docker_daemon_stopped(env: Env) -> list[Row]:
    folder = env.folder("dockerd")
    command, pidfile, host = private_dockerd(folder)
    try:
        done = subprocess.run([sys.executable, "-c", DOCKERD_SCRIPT, str(REPO), str(pidfile), json.dumps(command)],
                              cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
                              env={**os.environ, "DOCKER_HOST": host})
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            return [Row("docker daemon killed mid-episode", "rollout engine, docker backend", False, "?", None,
                        (done.stderr or done.stdout)[-400:])]
        found = json.loads(lines[-1])
        (victim, bystander), again = found["first"], found["again"]
        ok = victim[1] == 0 and victim[0] is not None and again == 1.0
        return [Row("docker daemon killed mid-episode, then restarted", "rollout engine, docker backend", ok,
                    "in flight: both episodes of the rollout (scored 0, status sandbox_error)" if ok else "?",
                    found["recover"], f"victim {victim[0]}: {victim[2][:100]}; bystander {bystander[0]}; "
                    f"after the restart an episode scored {again} {found['again_error']}".rstrip())]
    finally:
        if pidfile.exists():
            subprocess.run(["kill", pidfile.read_text().strip()], check=False)
            time.sleep(3)
        for pid in _pids_with(str(folder)):  # the shims of containers the killed daemon left running
            _kill_tree(pid)
        for root in ("exec", "data"):
            subprocess.run(["umount", "-R", "-l", str(folder / root)], capture_output=True, check=False)


def _kill_tree(pid: int) -> None:
    import signal

    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for child in children:
        _kill_tree(int(child))
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- models that answer badly -----------------------------------------------------------------------------
class BadModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint whose reply depends on the model name asked for."""

    calls = 0

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        BadModel.calls += 1
        kind = body["model"]
        text = {"empty": "", "endless": "ls -la /app; " * 20000, "surrogate": "```bash\necho \udcff\udcfe > x\n```"}.get(kind, "")
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": kind, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text},
             "finish_reason": "length" if kind == "endless" else "stop"}]}
        data = json.dumps(reply).encode()
        if kind == "badbytes":  # raw bytes that are not UTF-8, inside the JSON string
            data = data.replace(b'"content": ""', b'"content": "\xff\xfe ls \xc3"')
        if kind == "dies" and BadModel.calls > 1:
            self.connection.close()  # the server process is going away: no answer at all
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


MODEL_FAULTS = {
    "empty": "model returns empty replies",
    "endless": "model returns endless output (240 kB per reply, finish_reason length)",
    "badbytes": "model returns bytes that are not UTF-8",
    "surrogate": "model returns text with lone surrogates (not encodable as UTF-8)",
    "dies": "model server stops answering mid-eval",
}


@fault
def bad_models(env: Env) -> list[Row]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BadModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    rows = []
    try:
        for kind, name in MODEL_FAULTS.items():
            BadModel.calls = 0
            folder = env.folder(f"model-{kind}")
            started = time.monotonic()
            result, records = eval_tasks(folder, {"t0": {}, "t1": {}}, model=f"openai:{kind}",
                                         extra=("--base-url", url), env={"OPENAI_API_KEY": "unused"})
            seconds = time.monotonic() - started
            ok = result.returncode == 0 and no_traceback(result.stdout + result.stderr) and len(records) == 2 \
                and all(r.get("status") for r in records.values())
            note = "; ".join(f"{t}: {outcome(r)}" for t, r in sorted(records.items())) or \
                (result.stderr or result.stdout)[-300:]
            rows.append(Row(name, "coevo eval --model openai: (an HTTP endpoint)", ok,
                            "nothing (its episodes score 0, recorded with their cause)" if ok else "?",
                            seconds if kind == "dies" else None, note))
    finally:
        server.shutdown()
    return rows


# -- corrupt files on load ----------------------------------------------------------------------------------
@fault
def corrupt_files(env: Env) -> list[Row]:
    rows = []
    folder = env.folder("corrupt")
    model = folder / "model"
    shutil.copytree(env.tiny, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    write_task(folder / "tasks", "t0")
    result = coevo_run("eval", "--model", str(model), "--harness", str(HARNESS), "--tasks", str(folder / "tasks"),
                       "--split", "all")
    text = result.stdout + result.stderr
    ok = result.returncode == 2 and no_traceback(text) and "model.safetensors" in text
    rows.append(Row("corrupted checkpoint on load (weights cut in half)", "coevo eval --model", ok, "nothing", None,
                    text.strip().splitlines()[-1][:200] if text.strip() else ""))

    from coevo.bundle import write_bundle
    from coevo.harness import load_harness

    bundle = write_bundle(folder / "bundle", load_harness(HARNESS), env.tiny, {"test": {}}, "bundle\n")
    (bundle / "report.json").write_text('{"test": {"pass_at_1": 0.5')
    result = coevo_run("eval", "--bundle", str(bundle), "--tasks", str(folder / "tasks"), "--split", "all")
    text = result.stdout + result.stderr
    ok = result.returncode == 2 and no_traceback(text) and "report.json" in text
    rows.append(Row("corrupted bundle on load (report.json cut)", "coevo eval --bundle", ok, "nothing", None,
                    text.strip().splitlines()[-1][:200] if text.strip() else ""))
    return rows
