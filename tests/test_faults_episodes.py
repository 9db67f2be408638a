"""Faults inside an episode are that episode's data, never the run's end: a model endpoint that answers
empty, endless, undecodable or lone-surrogate text, or stops answering; a verifier that hangs, crashes or
writes a malformed or huge reward. Real sandboxes, a real HTTP server, the real rollout engine; each
trajectory is saved and read back, as `coevo eval` does. (benchmarks/faults.py runs the same faults
through `coevo eval` in a subprocess.)"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import TASK_TOML

HARNESS = Path(__file__).resolve().parents[1] / "harnesses" / "mini_bash.yaml"
REPLIES = {"empty": "", "endless": "ls -la /app; " * 5000, "surrogate": "```bash\necho \udcff\udcfe > /app/x\n```"}


class BadModel(BaseHTTPRequestHandler):
    """An OpenAI chat endpoint whose reply is the fault named by the model asked for."""

    def do_POST(self):
        kind = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["model"]
        if kind == "dies":
            self.connection.close()  # no answer at all
            return
        message = {"role": "assistant", "content": REPLIES.get(kind, "")}
        data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": kind, "choices": [
            {"index": 0, "message": message, "finish_reason": "length" if kind == "endless" else "stop"}]}).encode()
        if kind == "badbytes":  # bytes that are not UTF-8 inside the JSON string
            data = data.replace(b'"content": ""', b'"content": "\xff\xfe ls \xc3"')
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def bad_model():
    server = ThreadingHTTPServer(("127.0.0.1", 0), BadModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def played(tasks: list, policy, tmp_path: Path) -> list:
    """The episodes of `tasks`, saved and read back as `coevo eval --out` does."""
    from coevo.harness import load_harness
    from coevo.rollout import rollout
    from coevo.rollout.trajectory import load_trajectories, save_trajectories

    harness = load_harness(HARNESS).with_overrides({"limits.max_turns": 3})
    trajectories = rollout(tasks, harness, policy)
    return load_trajectories(save_trajectories(tmp_path / "out.jsonl", trajectories))


@pytest.mark.parametrize(("kind", "status"), [("empty", "format_errors"), ("endless", None),
                                              ("surrogate", None), ("badbytes", "policy_error"),
                                              ("dies", "policy_error")])
def test_a_model_that_answers_badly_scores_its_episode_zero_with_the_cause(bad_model, make_task, tmp_path,
                                                                            kind, status):
    from coevo.policy.openai import OpenAIPolicy
    from coevo.tasks import load_task

    policy = OpenAIPolicy(kind, base_url=bad_model, api_key_env=None, max_retries=0, timeout_s=20)
    (episode,) = played([load_task(make_task())], policy, tmp_path)
    assert episode.status is not None and episode.reward == 0
    if status:
        assert episode.status == status, episode.error
    if kind == "surrogate":  # the command ran with U+FFFD where the surrogates were; the record is valid UTF-8
        assert "\ufffd" in episode.steps[0].reply and episode.status != "policy_error", episode.error


def test_broken_verifiers_are_verifier_errors_and_a_healthy_neighbour_passes(make_task, tmp_path):
    from coevo.harness import load_harness
    from coevo.policy import make_policy
    from coevo.tasks import load_task

    verifiers = {
        "hangs": ("#!/bin/bash\nsleep 600\n", "VerifierTimeout"),
        "crashes": ("#!/bin/bash\nkill -SEGV $$\n", "neither"),
        "malformed": ("#!/bin/bash\necho '{\"reward\": 1.0,' > /logs/verifier/reward.json\n", "not valid JSON"),
        "huge": ("#!/bin/bash\nhead -c 50000000 /dev/zero | tr '\\0' ' ' > /logs/verifier/reward.json\n",
                 "larger than"),
    }
    fast = TASK_TOML.replace("timeout_sec = 20.0", "timeout_sec = 3.0")
    tasks = [load_task(make_task(name, test_sh=test_sh, task_toml=fast)) for name, (test_sh, _) in verifiers.items()]
    tasks.append(load_task(make_task("healthy")))
    harness = load_harness(HARNESS)
    episodes = {t.task: t for t in played(tasks, make_policy("oracle", harness=harness, tasks=tasks), tmp_path)}
    assert episodes["healthy"].reward == 1.0
    for name, (_, cause) in verifiers.items():
        assert episodes[name].reward == 0 and cause in (episodes[name].verify_error or ""), episodes[name]


def _bwrap_running(mark: str) -> int | None:
    """The bwrap sandbox around the process whose command line holds `mark`."""
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or mark.encode() not in (proc / "cmdline").read_bytes():
                continue
            pid = int(proc.name)
            while pid > 1:
                stat = Path(f"/proc/{pid}/stat").read_text()
                if stat.split("(", 1)[1].startswith("bwrap"):
                    return pid
                pid = int(stat.rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    return None


def test_a_sandbox_killed_from_the_host_costs_its_episode_only(make_task, tmp_path):
    import os
    import signal
    import time

    from coevo.harness import load_harness, render_action
    from coevo.policy.scripted import ScriptedPolicy
    from coevo.rollout import rollout
    from coevo.tasks import load_task

    mark = f"coevo-victim-{os.getpid()}-{time.monotonic_ns()}"
    harness = load_harness(HARNESS).with_overrides({"limits.max_turns": 3})
    tasks = [load_task(make_task(name)) for name in ("victim", "bystander")]

    def reply(request, turn):
        command = f"(exec -a {mark} sleep 20)" if "victim" in request.meta.get("task", "") else "sleep 3"
        return render_action(harness, [f"{command}; echo 42 > /app/answer.txt"], submit=False) if turn == 0 \
            else render_action(harness, [], submit=True)

    def killer():
        deadline = time.monotonic() + 60
        while (box := _bwrap_running(mark)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if box:
            os.kill(box, signal.SIGKILL)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    started = time.monotonic()
    victim, bystander = rollout(tasks, harness, ScriptedPolicy(reply))
    thread.join(5)
    assert time.monotonic() - started < 20  # the kill ended the victim's command, not its 20 s sleep
    assert victim.status is not None and victim.reward == 0 and bystander.reward == 1.0
