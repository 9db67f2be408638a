"""The sandbox contract, written once for every backend (like Optuna's storage conformance suite).

A backend's test module subclasses `SandboxContract` and provides the `sandbox` fixture: a started
sandbox for a task made by `make_task`, closed after the test. Everything runs for real.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from pathlib import Path

import pytest

from coevo.verify import verify


def pid_namespace_members(ns: str) -> list[int]:
    """Host pids of processes whose pid namespace is `ns` (e.g. 'pid:[4026532]')."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == ns:
                    members.append(int(entry))
            except OSError:  # the process exited while we looked: it is no member any more
                continue
    return members


class SandboxContract:
    def host_leftovers(self, sandbox) -> list[Path]:
        """Host paths that exist while the sandbox is open and must be gone after close (backend hook)."""
        return [sandbox.workspace]

    # -- the shell ---------------------------------------------------------------------------------
    def test_round_trip_and_exit_code(self, sandbox):
        result = sandbox.run("echo hello; echo oops >&2")
        assert result.output == "hello\noops\n" and result.exit_code == 0 and not result.timed_out
        assert sandbox.run("exit_code() { return 7; }; exit_code").exit_code == 7

    def test_cwd_and_environment_persist(self, sandbox):
        sandbox.run("mkdir -p /app/sub && cd /app/sub && export COEVO_X=42")
        assert sandbox.run("pwd; echo $COEVO_X").output == "/app/sub\n42\n"

    def test_starts_in_app_as_non_root(self, sandbox):
        result = sandbox.run("pwd; id -u")
        cwd, uid = result.output.split()
        assert cwd == "/app" and int(uid) != 0

    def test_syntax_error_is_a_failed_command(self, sandbox):
        result = sandbox.run("if then fi")
        assert result.exit_code != 0 and "syntax error" in result.output
        assert sandbox.run("echo still here").output == "still here\n"

    def test_timeout_kills_process_group_and_sandbox_stays_usable(self, sandbox):
        sandbox.run("export KEEP=me; cd /tmp")
        result = sandbox.run("sleep 300 & echo $! > /tmp/child; sleep 300", timeout=0.5)
        assert result.timed_out and result.exit_code is None and "timed out" in result.output
        after = sandbox.run("echo $KEEP; pwd; kill -0 $(cat /tmp/child) 2>/dev/null && echo ALIVE || echo gone")
        assert after.output == "me\n/tmp\ngone\n"

    def test_busy_loop_in_the_shell_itself_times_out(self, sandbox):
        result = sandbox.run("while :; do :; done", timeout=0.5)
        assert result.timed_out
        assert sandbox.run("echo ok").output == "ok\n"

    def test_exit_restarts_the_shell(self, sandbox):
        result = sandbox.run("exit 3")
        assert result.restarted and result.exit_code == 3
        assert sandbox.run("echo back").output == "back\n"

    def test_output_cap_keeps_head_and_tail(self, sandbox):
        result = sandbox.run("seq 1 200000")
        assert result.omitted_bytes > 0 and "bytes omitted" in result.output
        assert result.output.startswith("1\n2\n3\n") and result.output.endswith("199999\n200000\n")
        assert len(result.output) < 20_000

    def test_binary_and_invalid_utf8_output(self, sandbox):
        assert "\ufffd" in sandbox.run(r"printf 'ok\xff\xfe\n'").output
        result = sandbox.run("head -c 65536 /dev/urandom")
        assert isinstance(result.output, str) and result.exit_code == 0

    def test_file_round_trip(self, sandbox):
        sandbox.write_file("/app/dir/data.bin", bytes(range(256)))
        assert sandbox.read_file("/app/dir/data.bin") == bytes(range(256))
        with pytest.raises(FileNotFoundError):
            sandbox.read_file("/app/missing")

    # -- isolation ---------------------------------------------------------------------------------
    def test_no_network(self, sandbox):
        probe = "python3 -c \"import socket; socket.create_connection(('{}', {}), timeout=2)\" && echo CONNECTED"
        assert "CONNECTED" not in sandbox.run(probe.format("1.1.1.1", 53), timeout=10).output
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        accepted = []
        threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
        port = server.getsockname()[1]
        result = sandbox.run(probe.format("127.0.0.1", port), timeout=10)
        server.close()
        assert "CONNECTED" not in result.output and not accepted

    def test_no_writes_outside_app(self, sandbox, tmp_path):
        outside = tmp_path / "outside.txt"
        for target in ["/etc/coevo-test", "/usr/coevo-test", str(outside)]:
            assert sandbox.run(f"echo x > {target}").exit_code != 0
        assert not outside.exists() and not Path("/etc/coevo-test").exists()
        assert sandbox.run("echo x > /app/inside && echo x > /tmp/scratch").exit_code == 0

    def test_symlink_pointing_outside_app(self, sandbox, tmp_path):
        (tmp_path / "host.txt").write_text("host\n")
        sandbox.run(f"ln -s {tmp_path} /app/escape; ln -s /etc /app/etc")
        assert sandbox.run("echo pwned > /app/escape/host.txt").exit_code != 0
        assert sandbox.run("echo pwned > /app/etc/passwd").exit_code != 0
        with pytest.raises(OSError):
            sandbox.write_file("/app/etc/coevo", "pwned")
        assert (tmp_path / "host.txt").read_text() == "host\n"

    def test_fork_bomb_is_contained(self, sandbox):
        sandbox.run("bomb() { bomb | bomb & }; bomb", timeout=3)
        ns = os.readlink(f"/proc/{sandbox._shell.child_pid}/ns/pid")
        probe = sandbox.run("ulimit -u > /tmp/nproc; read n < /tmp/nproc; echo NPROC=$n")  # builtins: no fork
        nproc = int(re.findall(r"^NPROC=(\d+)$", probe.output, re.MULTILINE)[-1])
        assert len(pid_namespace_members(ns)) <= nproc + 2  # the limit holds; the host can still fork
        after = sandbox.run("echo alive", timeout=10)
        assert "alive" in after.output, after  # the whole result, to tell a slow restart from a dead shell
        sandbox.close()
        assert pid_namespace_members(ns) == []

    def test_rlimits_are_set(self, sandbox):
        nproc, fsize = sandbox.run("ulimit -u; ulimit -f").output.split()
        assert nproc != "unlimited" and fsize != "unlimited"

    def test_close_leaves_no_process_and_no_folder(self, sandbox):
        sandbox.run("sleep 1000 & setsid sleep 1000 & nohup sleep 1000 >/dev/null 2>&1 &")
        ns = os.readlink(f"/proc/{sandbox._shell.child_pid}/ns/pid")
        assert len(pid_namespace_members(ns)) >= 4
        leftovers = self.host_leftovers(sandbox)
        assert all(path.exists() for path in leftovers)
        sandbox.close()
        assert pid_namespace_members(ns) == [] and not any(path.exists() for path in leftovers)
        sandbox.close()  # idempotent

    # -- tasks and verification ----------------------------------------------------------------------
    def test_tests_and_solution_invisible_during_agent_phase(self, sandbox, task):
        listing = sandbox.run(f"ls /tests /solution {task.path}/tests {task.path}/solution 2>&1; "
                              f"cat {task.path}/tests/test.sh")
        assert "No such file" in listing.output and "reward" not in listing.output

    def test_prewritten_reward_file_is_worth_nothing(self, sandbox, task):
        sandbox.run("mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; "
                    "mkdir -p /app/logs/verifier; echo 1 > /app/logs/verifier/reward.txt; echo 1 > /tmp/reward.txt")
        result = verify(task, sandbox)
        assert result.reward == 0.0 and result.error is None  # the task's own test said 0
