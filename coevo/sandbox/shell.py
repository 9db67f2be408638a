"""One persistent bash inside the sandbox, driven over pipes.

Each command is sent NUL-terminated and `eval`ed by a small loop, so a syntax error is just a failed
command and cwd/exports persist. After the command the loop prints a sentinel line with a random
token, the exit status and the cwd. The loop also saves the exported environment, so that a shell
restarted after a timeout resumes where the killed one was.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import select
import shlex
import signal
import subprocess
import time

from coevo import ExecResult
from coevo.errors import SandboxError

STATE_DIR = "/run/coevo"  # a private bind of the sandbox's state folder; outlives shell restarts
_LOOP = r"""
{limits}
[ -f {state}/env ] && . {state}/env 2>/dev/null
cd "$(cat {state}/cwd 2>/dev/null || echo "$PWD")" 2>/dev/null
printf '\n{token} 0 %s\n' "$PWD"
while IFS= read -r -d '' __coevo_cmd; do
  eval "$__coevo_cmd" </dev/null 2>&1
  __coevo_status=$?
  export -p >{state}/env 2>/dev/null; printf '%s' "$PWD" >{state}/cwd 2>/dev/null
  printf '\n{token} %d %s\n' "$__coevo_status" "$PWD"
done
"""


class CappedOutput:
    """Keeps the first and last `cap/2` bytes of a stream and counts what falls in between."""

    def __init__(self, cap: int):
        self.half = max(cap, 1024) // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.omitted = 0

    def feed(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > 2 * self.half:  # trim in bulk, not on every chunk
            cut = len(self.tail) - self.half
            self.omitted += cut
            del self.tail[:cut]

    def drop_last(self, n: int) -> None:
        """Remove the sentinel line, which is always the last bytes of the stream."""
        if self.omitted == 0:
            joined = self.head + self.tail
            self.head, self.tail = joined[: self.half], joined[self.half : len(joined) - n]
            if len(joined) - n < self.half:
                self.head = joined[: len(joined) - n]
        else:
            del self.tail[len(self.tail) - n :]

    def text(self) -> str:
        if len(self.tail) > self.half:
            self.omitted += len(self.tail) - self.half
            del self.tail[: len(self.tail) - self.half]
        head = self.head.decode("utf-8", errors="replace")
        if not self.omitted:
            return head + self.tail.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[... {self.omitted} bytes omitted ...]\n{tail}"


def command_bytes(command: str) -> bytes:
    """A command as the shell reads it: NULs dropped (they would end it), then the NUL that ends it."""
    return text_bytes(command.replace("\0", "")) + b"\0"


def text_bytes(text: str) -> bytes:
    """UTF-8, also for text a model wrote with lone surrogates (a client's decoding of bytes that were not
    UTF-8): those become the bytes they stand for, or '?', so that the command runs instead of the sandbox
    failing on its encoding."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


class ShellDied(Exception):
    """The shell exited (an `exit` command, a crash) before printing its sentinel."""


class Shell:
    """A bash loop in its own bwrap process; `kill()` ends it and everything in its pid namespace."""

    def __init__(self, argv: list[str], limits_script: str, pass_fds: tuple[int, ...] = ()):
        self.token = f"__COEVO_{secrets.token_hex(8)}__"
        self._sentinel = re.compile(rb"\n" + self.token.encode() + rb" (-?\d+) ([^\n]*)\n$")
        info_r, info_w = os.pipe()
        loop = _LOOP.replace("{token}", self.token).replace("{state}", STATE_DIR).replace("{limits}", limits_script)
        self.proc = subprocess.Popen(
            [argv[0], "--info-fd", str(info_w), *argv[1:], "bash", "--noprofile", "--norc", "-c", loop],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(info_w, *pass_fds), start_new_session=True,
        )
        os.close(info_w)
        with os.fdopen(info_r) as info:
            raw = info.read()
        self.child_pid = json.loads(raw)["child-pid"] if raw.strip() else None
        self._fd = self.proc.stdout.fileno()

    def send(self, command: str) -> None:
        self.proc.stdin.write(command_bytes(command))
        self.proc.stdin.flush()

    def read_until_sentinel(self, deadline: float | None, out: CappedOutput) -> tuple[int, str] | None:
        """Feed output into `out` until the sentinel; (status, cwd), or None at the deadline."""
        recent = b""
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise ShellDied(self.proc.wait())
            out.feed(chunk)
            recent = (recent + chunk)[-(len(self.token) + 4200) :]
            if recent.endswith(b"\n") and (match := self._sentinel.search(recent)):
                out.drop_last(len(match.group(0)))
                return int(match.group(1)), match.group(2).decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL the pid namespace's init; the kernel kills every process in it before the init dies.

        The outer bwrap reaps its init and then exits, so waiting for it means nothing is left (killing
        the outer bwrap first would orphan the init as a zombie nobody reaps).
        """
        _kill(self.child_pid or self.proc.pid)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill(self.proc.pid)
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:  # the pipe's reader is already gone
                pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def pid_alive(pid: int) -> bool:
    """Whether a process of this host still exists: what decides that a killed run's leftovers (temporary
    folders, containers) may be removed."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class ShellCommands:
    """The command loop both backends share over their persistent shell: send, read to the sentinel, and
    on a timeout or a dead shell, restart it (the backend's `_restart`) and say so in the result.

    A backend provides `_shell` (a started shell or None), `_restart()`, `timeout` and `output_cap`."""

    _shell: Shell | None
    timeout: float
    output_cap: int

    def _restart(self) -> None: ...

    def start(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, command: str, timeout: float | None = None) -> ExecResult:
        return self._run(command, timeout or self.timeout, self.output_cap)

    def _run(self, command: str, timeout: float, cap: int) -> ExecResult:
        if self._shell is None:
            raise SandboxError("run() on a sandbox that is not started (or already closed)")
        out, started = CappedOutput(cap), time.monotonic()
        try:
            self._shell.send(command)
            done = self._shell.read_until_sentinel(started + timeout, out)
        except (ShellDied, OSError) as e:  # OSError: a broken pipe or socket to the shell
            code = e.args[0] if isinstance(e, ShellDied) else None
            self._restart()
            return ExecResult(out.text(), code, time.monotonic() - started, restarted=True,
                              omitted_bytes=out.omitted)
        if done is None:  # past the deadline: kill the command and everything it started
            self._restart()
            text = out.text() + f"\n[command timed out after {timeout:g} s and was killed]"
            return ExecResult(text, None, time.monotonic() - started, timed_out=True, restarted=True,
                              omitted_bytes=out.omitted)
        return ExecResult(out.text(), done[0], time.monotonic() - started, omitted_bytes=out.omitted)

    # -- files, through the shell: the agent's permissions apply, and symlinks resolve inside the sandbox,
    # never on the host
    def read_file(self, path: str) -> bytes:
        # Markers keep stray output of the agent's background processes out of the payload.
        command = f"printf '<<B64<<'; base64 -w0 -- {shlex.quote(path)} && printf '>>B64>>'"
        result = self._run(command, self.timeout, 1 << 30)
        match = re.search(r"<<B64<<([A-Za-z0-9+/=]*)>>B64>>", result.output)
        if result.exit_code != 0 or not match:
            raise FileNotFoundError(f"{path} (in the sandbox): {result.output.strip()[-300:]}")
        return base64.b64decode(match.group(1))

    def write_file(self, path: str, data: bytes | str) -> None:
        payload = base64.b64encode(text_bytes(data) if isinstance(data, str) else data).decode()
        quoted = shlex.quote(path)
        command = f"mkdir -p -- \"$(dirname -- {quoted})\" && printf %s {payload} | base64 -d > {quoted}"
        result = self._run(command, self.timeout, 4096)
        if result.exit_code != 0:
            raise OSError(f"cannot write {path} in the sandbox: {result.output.strip()}")
