"""The bubblewrap command line: the host root read-only, private /app and /tmp, no network, own
pid/ipc/uts namespaces, rlimits, and a non-root uid.

The host's top-level entries are bound one by one (instead of `--ro-bind / /`) so that mount points
that do not exist on the host (/app, /tests, /logs/verifier, /solution) can be created in bwrap's
own tmpfs root without ever writing to the host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from coevo.errors import SandboxUnavailableError

NOBODY = 65534
# Mounted fresh by bwrap or by us; never taken from the host.
OWN_MOUNTS = {"proc", "dev", "tmp", "run", "app", "logs", "tests", "solution", "lost+found"}
# Private to the host's users: API keys, credentials, other projects. Masked with an empty tmpfs.
ALWAYS_HIDDEN = ("/root", "/home")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Limits:
    """Per-process rlimits inside the sandbox (RLIMIT_NPROC counts per uid, hence the non-root uid)."""

    cpu_sec: int = 600
    file_size_mb: int = 1024
    address_space_mb: int = 2048
    nproc: int = 256

    def ulimit_script(self) -> str:
        """Set by the sandbox's shell before its loop (builtins: no extra exec at start).

        Without -H/-S bash lowers soft and hard limits together, so commands cannot raise them again.
        """
        return (f"ulimit -t {self.cpu_sec}; ulimit -f {self.file_size_mb << 10}; "
                f"ulimit -v {self.address_space_mb << 10}; ulimit -u {self.nproc}")


@dataclass(frozen=True)
class Mount:
    host: Path
    dest: str
    writable: bool = False


def as_root() -> bool:
    return os.geteuid() == 0


@cache
def _host_root_args() -> tuple[str, ...]:
    args: list[str] = []
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        if entry.name in OWN_MOUNTS:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), entry.path]
        elif entry.is_dir() or entry.is_file():
            args += ["--ro-bind", entry.path, entry.path]
    return tuple(args)


def bwrap_argv(
    mounts: list[Mount], hidden: list[Path], env: dict[str, str], chdir: str, uid: int
) -> list[str]:
    """argv that runs the rest of the command line (appended by the caller) inside the sandbox.

    rlimits are set by the shell itself, with builtins (see `Limits.ulimit_script`).
    """
    argv = [require_bwrap(), *_host_root_args(), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
    for path in [*ALWAYS_HIDDEN, *map(str, hidden)]:
        if os.path.isdir(path):
            argv += ["--tmpfs", path]
    for m in mounts:
        if os.path.dirname(m.dest) not in ("/", "/run"):  # bwrap would make missing parents 0700
            argv += ["--dir", os.path.dirname(m.dest)]
        argv += ["--bind" if m.writable else "--ro-bind", str(m.host), m.dest]
    argv += ["--chdir", chdir, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    if not as_root():
        argv += ["--unshare-user"]  # unprivileged bwrap: the caller's own non-root uid inside
    for key, value in env.items():
        argv += ["--setenv", key, value]
    if as_root():
        argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    return argv


@cache
def require_bwrap() -> str:
    """Path of bwrap, once it is known to work here. Never fall back to running unsandboxed."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed; the local sandbox needs it. "
            "Install it with `sudo apt-get install -y bubblewrap`, or use the docker backend."
        )
    probe = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid",
         *([] if as_root() else ["--unshare-user"]), "--die-with-parent", "true"],
        capture_output=True, text=True, timeout=30, check=False,
    )
    if probe.returncode != 0:
        raise SandboxUnavailableError(
            f"bubblewrap cannot create namespaces on this host: {probe.stderr.strip()}\n"
            "Unprivileged user namespaces are probably forbidden. To fix, one of:\n"
            "  sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0   (Ubuntu 24.04+ AppArmor)\n"
            "  sudo sysctl -w kernel.unprivileged_userns_clone=1               (older Debian kernels)\n"
            "  run coevo in a container started with --privileged or CAP_SYS_ADMIN, or use the docker backend.\n"
            "coevo never runs agent commands unsandboxed."
        )
    return bwrap
