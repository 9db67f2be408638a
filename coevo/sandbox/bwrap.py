"""The bubblewrap command line: a root made of the host's system folders only (read-only), a private
/app, /tmp and /run, no network, own pid/ipc/uts namespaces, no new user namespaces, rlimits, and a
non-root uid.

Nothing else of the host is there: no checkout and no .git, no run folders, no other tasks, no /home,
/root, /srv, /opt, /mnt, /var or /sys. The root is bwrap's own tmpfs, so mount points (/app, /tests,
/logs/verifier, /solution) are created there without ever writing to the host. A task that needs a
host path (a toolchain in /opt) names it in task.toml, `[environment] host_paths`, and gets it
read-only.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from coevo.errors import SandboxUnavailableError

NOBODY = 65534
# The host's top-level entries a task's userland needs: binaries, libraries and their config.
SYSTEM = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc")
# Readable by everyone, yet private to the host: masked even when their mode would allow reading.
SECRETS = ("shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "environment",
           "ssh", "ssl/private", "security/opasswd")
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
def system_root_args() -> tuple[str, ...]:
    """The system folders, bound read-only (symlinks such as merged-usr /bin -> usr/bin are kept)."""
    args: list[str] = []
    for name in SYSTEM:
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return (*args, *etc_mask_args())


@cache
def etc_mask_args() -> tuple[str, ...]:
    """Cover /etc's secrets: the named ones, and every entry that is not world-readable."""
    masked = {f"/etc/{name}" for name in SECRETS if os.path.lexists(f"/etc/{name}")}
    for folder, dirs, files in os.walk("/etc"):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not stat.S_ISLNK(mode) and not mode & stat.S_IROTH:
                masked.add(path)
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in masked]
    args: list[str] = []
    for path in sorted(masked):
        if any(path.startswith(other + "/") for other in masked):
            continue  # its folder is masked already
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--tmpfs", path]
        elif not os.path.islink(path):
            args += ["--ro-bind", "/dev/null", path]
    return tuple(args)


def bwrap_argv(mounts: list[Mount], hidden: list[Path], env: dict[str, str], chdir: str, uid: int,
               seccomp_fd: int) -> list[str]:
    """argv that runs the rest of the command line (appended by the caller) inside the sandbox.

    rlimits are set by the shell itself, with builtins (see `Limits.ulimit_script`).
    """
    argv = [require_bwrap(), *system_root_args(), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run",
            "--dir", "/var", "--symlink", "/tmp", "/var/tmp"]
    for path in map(str, hidden):  # a task set kept under a system folder (say /usr/share)
        if os.path.isdir(path) and any(path.startswith(f"/{name}/") for name in SYSTEM):
            argv += ["--tmpfs", path]
    for m in mounts:
        if os.path.dirname(m.dest) not in ("/", "/run"):  # bwrap would make missing parents 0700
            argv += ["--dir", os.path.dirname(m.dest)]
        argv += ["--bind" if m.writable else "--ro-bind", str(m.host), m.dest]
    argv += ["--chdir", chdir, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv",
             "--seccomp", str(seccomp_fd)]
    if not as_root():
        argv += ["--unshare-user"]  # unprivileged bwrap: the caller's own non-root uid inside
    for key, value in env.items():
        argv += ["--setenv", key, value]
    if as_root():  # drop to the sandbox uid with no capabilities, not even in the bounding set
        argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all", "--"]
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
