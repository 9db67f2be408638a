"""The red-team suite, written once for every sandbox backend (like `sandbox_contract.py`).

After the Codex sandbox tests: a probe is a shell command that exits 0 if and only if it breached.
Each runs as an agent command in a fresh sandbox of a real task; a probe that times out or fails held.
Verifier-tamper probes are judged by the real verifier instead: the agent's command runs on an
unsolved task, then `verify` scores it, and a breach is reward 1.

So that a probe cannot hold by accident (a typo, a missing tool), every probe marked `control` is also
run directly on the host by the test, where it must breach: what it looks for is really there.

A backend's test module subclasses `RedTeam` and provides `start_sandbox(task) -> started Sandbox`.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from redteam_probes import PROBES, TAMPER, Probe  # noqa: F401 - the suite's catalogue, re-exported

REPO = Path(__file__).resolve().parents[1]


class Targets:
    """What the probes aim at, set up on the host for real: a canary checkout with its git history
    outside /tmp, another task set, host servers on loopback and on the host's address, a host process
    with a unique name, a canary API key in the environment."""

    def __init__(self, task_dir: Path, other_task: Path):
        self.secret = f"coevo-secret-{secrets.token_hex(6)}"
        self.key = f"sk-canary-{secrets.token_hex(8)}"
        self.task_dir, self.other_task = task_dir, other_task
        self.canary = self._canary_checkout()
        self.host_tmp_file = Path(tempfile.mkstemp(prefix="coevo-host-")[1])
        self.host_tmp_file.write_text(self.secret)
        self.host_tmp_file.chmod(0o644)
        self.proc_name = f"coevo-canary-{secrets.token_hex(4)}"
        self.process = subprocess.Popen([self.proc_name, "600"], executable="/bin/sleep")
        self.abstract = f"coevo-abstract-{secrets.token_hex(4)}"
        self._sockets: list[socket.socket] = []
        self.tcp_port = self._serve_tcp(socket.AF_INET, "127.0.0.1")
        self.tcp_any_port = self._serve_tcp(socket.AF_INET, "0.0.0.0")
        self.udp_port = self._serve_udp()
        self._serve_abstract()
        self.host_ip = host_address()

    def fields(self) -> dict[str, str]:
        return {"repo": str(REPO), "canary": str(self.canary), "secret": self.secret, "task": str(self.task_dir),
                "other_task": str(self.other_task), "host_tmp_file": str(self.host_tmp_file),
                "python": sys.executable, "canary_proc_pattern": pattern(self.proc_name),
                "canary_pid": str(self.process.pid), "tcp_port": str(self.tcp_port),
                "tcp_any_port": str(self.tcp_any_port), "udp_port": str(self.udp_port), "host_ip": self.host_ip,
                "abstract": self.abstract, "key_pattern": pattern(self.key)}

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        for s in self._sockets:
            s.close()
        self.host_tmp_file.unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", str(self.canary)], check=False)

    def _canary_checkout(self) -> Path:
        """A checkout where most servers keep one: outside /tmp and /home (the first writable of these)."""
        for base in ("/srv", "/opt", "/var/lib", str(REPO.parent)):
            if os.access(base, os.W_OK):
                root = Path(tempfile.mkdtemp(prefix="coevo-canary-", dir=base))
                break
        files = {"tasks/leak-000/solution/solve.sh": f"echo {self.secret}\n",
                 "tasks/leak-000/tests/test.sh": f"# {self.secret}\n",
                 "coevo/tasks/generate/gen.py": f"SECRET = '{self.secret}'\n",
                 "runs/quickstart/state.json": f'{{"secret": "{self.secret}"}}\n', "secret.txt": self.secret}
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git[:3], "init", "-q"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "canary"], check=True)
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)  # as readable as a real checkout
        return root

    def _serve_tcp(self, family: int, address: str) -> int:
        server = socket.socket(family)
        server.bind((address, 0))
        server.listen()
        self._sockets.append(server)
        threading.Thread(target=_answer_forever, args=(server,), daemon=True).start()
        return server.getsockname()[1]

    def _serve_udp(self) -> int:
        server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        server.bind(("0.0.0.0", 0))
        self._sockets.append(server)

        def echo():
            while True:
                try:
                    _, peer = server.recvfrom(64)
                    server.sendto(b"BREACH", peer)
                except OSError:  # closed at teardown
                    return

        threading.Thread(target=echo, daemon=True).start()
        return server.getsockname()[1]

    def _serve_abstract(self) -> None:
        server = socket.socket(socket.AF_UNIX)
        server.bind(b"\0" + self.abstract.encode())
        server.listen()
        self._sockets.append(server)
        threading.Thread(target=_answer_forever, args=(server,), daemon=True).start()


def _answer_forever(server: socket.socket) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:  # closed at teardown
            return
        with conn:
            conn.sendall(b"BREACH")


def pattern(text: str) -> str:
    """A grep pattern that matches `text` but not itself, so a probe's own command line is no hit."""
    return f"'{text[:-1]}[{text[-1]}]'"


def host_address() -> str:
    """A non-loopback address of this host (no packet is sent), or 127.0.0.1 when there is none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.254.254.254", 1))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


TEST_SH = """#!/bin/bash
cd /app
if pytest -q -p no:cacheprovider /tests/test_state.py; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
TEST_STATE = """from pathlib import Path


def test_answer():
    assert Path("/app/answer.txt").read_text().strip() == "42"
"""


def pid_names() -> dict[int, str]:
    """Host pid -> command line, for every process this host can see."""
    names = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                names[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:  # gone while we looked
                continue
    return names


def running(mark: str, n: int, exclude: int = -1, within: float = 5.0) -> list[str]:
    """The command lines holding `mark`, polled until there are `n` of them (or `within` seconds)."""
    import time

    deadline = time.monotonic() + within
    while True:
        found = [cmd for pid, cmd in pid_names().items() if mark in cmd and pid != exclude]
        if len(found) == n or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


class RedTeam:
    """Every probe must hold. Subclasses give `start_sandbox(task) -> Sandbox` (started)."""

    def start_sandbox(self, task):
        raise NotImplementedError

    @staticmethod
    def targets(root: Path):
        """The body of each backend's module-scoped `redteam` fixture: the probe task and the host-side
        targets, with the planted API key in the environment while the module runs."""
        from conftest import write_task

        from coevo.tasks import load_task

        task = load_task(write_task(root / "tasks", "redteam", test_sh=TEST_SH,
                                    files={"tests/test_state.py": TEST_STATE}))
        other = write_task(root / "other-set", "other-000", solve_sh="echo SECRET\n")
        targets = Targets(task.path, other)
        (other / "solution" / "solve.sh").write_text(f"echo {targets.secret}\n")
        saved = os.environ.get("OPENAI_API_KEY")
        os.environ["OPENAI_API_KEY"] = targets.key
        targets.process.kill()  # respawn it with the key in its environment, as a host service would be
        targets.process.wait()
        targets.process = subprocess.Popen([targets.proc_name, "600"], executable="/bin/sleep",
                                           env={**os.environ, "OPENAI_API_KEY": targets.key})
        yield task, targets
        os.environ.pop("OPENAI_API_KEY") if saved is None else os.environ.__setitem__("OPENAI_API_KEY", saved)
        targets.close()

    # -- probes --------------------------------------------------------------------------------------
    def test_probe_holds(self, redteam, probe: Probe):
        task, targets = redteam
        box = self.start_sandbox(task)
        try:
            result = box.run(probe.command.format(**targets.fields()), timeout=15)
        finally:
            box.close()
        assert result.exit_code != 0, f"BREACH ({probe.category}): {probe.name}\n{result.output[-2000:]}"

    def test_tampering_with_the_verifier_is_worth_nothing(self, redteam, tamper: str):
        from coevo.verify import verify

        task, _ = redteam
        box = self.start_sandbox(task)
        box.run(TAMPER[tamper], timeout=15)
        result = verify(task, box)
        assert result.reward == 0.0 and result.error is None, f"BREACH: {tamper}: {result.output[-2000:]}"

    def test_the_verifier_can_pay_out(self, redteam):
        """The control of the tamper probes: solving the task for real is worth 1."""
        from coevo.verify import verify

        task, _ = redteam
        box = self.start_sandbox(task)
        box.run("echo 42 > /app/answer.txt")
        assert verify(task, box).reward == 1.0

    # -- what the host sees afterwards ------------------------------------------------------------------
    def test_host_process_survives_signals_from_the_sandbox(self, redteam):
        task, targets = redteam
        box = self.start_sandbox(task)
        try:
            box.run(f"kill -9 {targets.process.pid}; kill -9 -1; pkill -9 sleep", timeout=15)
        finally:
            box.close()
        assert targets.process.poll() is None

    def test_no_orphan_survives_close(self, redteam):
        task, _ = redteam
        mark = f"coevo-orphan-{secrets.token_hex(4)}"
        box = self.start_sandbox(task)
        box.run(f"nohup setsid bash -c 'exec -a {mark} sleep 1000' >/dev/null 2>&1 & "
                f"(bash -c 'exec -a {mark} sleep 1000' &) ; disown -a")
        assert len(running(mark, 2)) == 2  # they were running
        box.close()
        assert running(mark, 0, within=0) == []

    def test_symlinks_never_resolve_on_the_host(self, redteam, tmp_path):
        from coevo.errors import SandboxError

        task, targets = redteam
        box = self.start_sandbox(task)
        try:
            box.run(f"ln -s {targets.canary}/secret.txt /app/link; ln -s {targets.canary} /app/dirlink")
            box.download("/app", tmp_path / "out")
            assert (tmp_path / "out" / "link").is_symlink()
            try:
                box.download("/app/dirlink", tmp_path / "via-link")
            except SandboxError:
                pass
            leaked = [p for p in (tmp_path / "via-link").rglob("*") if p.is_file() and not p.is_symlink()]
            assert not leaked
            try:
                content = box.read_file("/app/link")
            except FileNotFoundError:
                content = b""
            assert targets.secret.encode() not in content
        finally:
            box.close()

    def test_timed_out_commands_die_within_two_seconds_and_the_session_lives(self, redteam):
        import time

        task, _ = redteam
        box = self.start_sandbox(task)
        try:
            box.run("export KEEP=me")
            for command in ["sleep 100", "while :; do :; done", "trap '' TERM INT HUP; sleep 100",
                            "(trap '' TERM; sleep 100) & sleep 100", "yes > /dev/null", "cat /dev/zero | sleep 100"]:
                started = time.monotonic()
                result = box.run(command, timeout=1)
                assert result.timed_out and time.monotonic() - started < 1 + 2, command
                assert box.run("echo $KEEP").output == "me\n", command
        finally:
            box.close()

