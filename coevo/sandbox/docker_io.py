"""The docker backend's plumbing: the engine client, the shell over an exec socket, archives in and
out, and the removal of containers whose run was killed."""

from __future__ import annotations

import functools
import os
import re
import secrets
import select
import socket
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from io import BytesIO
from pathlib import Path

from coevo.errors import SandboxError, SandboxUnavailableError
from coevo.sandbox.shell import _LOOP, STATE_DIR, CappedOutput, ShellDied, command_bytes, pid_alive

LABEL = "coevo.sandbox"
OWNER_LABEL = "coevo.owner"
HOST = socket.gethostname()
START_DAEMON = ("start one with `sudo dockerd --iptables=false --ip-forward=false --bridge=none &` (what "
                ".ci/setup does), or point DOCKER_HOST at a remote engine (tcp://host:2376, ssh://user@host)")


@functools.cache
def docker_client():
    """One client per process (thread-safe for our calls); a clear error when no engine answers."""
    import docker

    try:
        client = docker.from_env(timeout=300, max_pool_size=64)
        client.ping()
    except docker.errors.DockerException as e:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        raise SandboxUnavailableError(f"no docker engine answers at {where} ({e}); {START_DAEMON}") from e
    return client


def daemon_error() -> str | None:
    """None when an engine answers, else why not and how to start one."""
    try:
        docker_client()
    except SandboxUnavailableError as e:
        return str(e)
    return None


def owner_labels() -> dict[str, str]:
    return {OWNER_LABEL: f"{HOST}:{os.getpid()}"}


def cleanup_orphans(client, everything: bool = False) -> list[str]:
    """Remove the coevo containers whose creating process on this host is gone (a run killed with -9
    cannot close them), or every coevo container with `everything`. Returns their names."""
    import docker.errors

    removed = []
    # list() inspects each container it found: one that another run closes (or prunes) meanwhile is gone
    # by then, which is not an error here.
    for container in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        host, _, pid = container.labels.get(OWNER_LABEL, "").rpartition(":")
        if everything or (host == HOST and pid.isdigit() and not pid_alive(int(pid))):
            try:
                container.remove(force=True)
            except docker.errors.APIError as e:  # 404 gone, 409 being removed by another prune
                if e.status_code not in (404, 409):
                    raise
                continue
            removed.append(container.name)
    return removed


class DockerShell:
    """shell.py's loop in a `docker exec -i` bash, over the engine's multiplexed stream.

    The loop first waits for one NUL from us, so that nothing is sent before the HTTP upgrade is read
    (bytes read along with the headers would be lost in the client's buffer)."""

    def __init__(self, api, container_id: str, user: str, workdir: str, limits: str, child_pid: int):
        self.token = f"__COEVO_{secrets.token_hex(8)}__"
        self._sentinel = re.compile(rb"\n" + self.token.encode() + rb" (-?\d+) ([^\n]*)\n$")
        loop = "IFS= read -r -d '' __coevo_go\n" + _LOOP.replace("{token}", self.token).replace(
            "{state}", STATE_DIR).replace("{limits}", limits)
        self.api, self.child_pid = api, child_pid
        self.exec_id = api.exec_create(container_id, ["bash", "--noprofile", "--norc", "-c", loop], stdin=True,
                                       user=user, workdir=workdir)["Id"]
        self._io = api.exec_start(self.exec_id, socket=True)
        self._sock = self._io._sock if isinstance(self._io, socket.SocketIO) else self._io
        self._buf = b""
        self._sock.sendall(b"\0")

    def send(self, command: str) -> None:
        self._sock.sendall(command_bytes(command))

    def read_until_sentinel(self, deadline: float | None, out: CappedOutput) -> tuple[int, str] | None:
        """Feed output into `out` until the sentinel; (status, cwd), or None at the deadline."""
        recent = b""
        while True:
            chunk = self._payload(deadline)
            if chunk is None:
                return None
            out.feed(chunk)
            recent = (recent + chunk)[-(len(self.token) + 4200):]
            if recent.endswith(b"\n") and (match := self._sentinel.search(recent)):
                out.drop_last(len(match.group(0)))
                return int(match.group(1)), match.group(2).decode(errors="replace")

    def _payload(self, deadline: float | None) -> bytes | None:
        """The next frame's bytes (stdout or stderr: an 8-byte header, then its size in bytes)."""
        while True:
            if len(self._buf) >= 8:
                size = int.from_bytes(self._buf[4:8], "big")
                if len(self._buf) >= 8 + size:
                    data, self._buf = self._buf[8:8 + size], self._buf[8 + size:]
                    return data
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._sock], [], [], wait)
            if not ready:
                return None
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                raise ShellDied(self._exit_code())
            self._buf += chunk

    def _exit_code(self) -> int | None:
        for _ in range(100):  # the engine records the exit a moment after the stream ends
            info = self.api.exec_inspect(self.exec_id)
            if not info["Running"]:
                return info["ExitCode"]
            time.sleep(0.01)
        return None

    def close(self) -> None:
        for closable in (self._sock, self._io):
            try:
                closable.close()
            except OSError:  # already gone with the container
                pass


def pack_folder(source: Path) -> bytes:
    """A tar of the folder's contents; symlinks stay links."""
    buffer = BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(str(source), arcname=".")
    return buffer.getvalue()


def extract_archive(chunks: Iterable[bytes], dest: Path) -> None:
    """Unpack the engine's archive of a sandbox folder into `dest`: its contents, not the folder.
    The 'tar' filter refuses members that would land outside `dest` through a link."""
    dest = Path(dest)
    with tempfile.TemporaryFile() as spool:
        for chunk in chunks:
            spool.write(chunk)
        spool.seek(0)
        with tarfile.open(fileobj=spool) as tar:
            members = list(_strip_root(tar.getmembers()))
            dest.mkdir(parents=True, exist_ok=True)
            try:
                tar.extractall(dest, members=members, filter="tar")
            except tarfile.FilterError as e:
                raise SandboxError(f"download into {dest}: refused {e}") from e


def _strip_root(members: list[tarfile.TarInfo]) -> Iterator[tarfile.TarInfo]:
    if not members:
        return
    root = members[0]
    if root.isfile():
        yield root
        return
    if not root.isdir():  # a link: its target is a path in the sandbox, meaningless here
        return
    prefix = root.name.rstrip("/") + "/"
    for member in members[1:]:
        if member.name.startswith(prefix):
            member.name = member.name[len(prefix):]
            if member.islnk() and member.linkname.startswith(prefix):
                member.linkname = member.linkname[len(prefix):]
            yield member
