"""The local backend: bubblewrap namespaces around one persistent bash per episode."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from pathlib import Path

from coevo.errors import SandboxError
from coevo.sandbox.bwrap import NOBODY, PATH, Limits, Mount, as_root, bwrap_argv
from coevo.sandbox.seccomp import program_fd
from coevo.sandbox.shell import STATE_DIR, CappedOutput, Shell, ShellCommands, ShellDied, pid_alive

DEFAULT_ENV = {"PATH": PATH, "HOME": "/tmp", "USER": "nobody", "LOGNAME": "nobody", "LANG": "C.UTF-8",
               "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}


WORKSPACE_PREFIX = "coevo-sbx-"


@functools.cache
def _sweep_once() -> None:
    sweep_orphans(Path(tempfile.gettempdir()))


def sweep_orphans(folder: Path) -> None:
    """Remove the sandbox workspaces in `folder` whose creating process is gone. A run killed with -9
    cannot close its sandboxes; the pid in each workspace's name tells whose it is. A live pid (even a
    reused one) keeps its folders. The first sandbox of each process sweeps the temp folder."""
    for workspace in folder.glob(f"{WORKSPACE_PREFIX}*-*"):
        pid = workspace.name.removeprefix(WORKSPACE_PREFIX).split("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(workspace, ignore_errors=True)


class LocalSandbox(ShellCommands):
    """A private /app (seeded by the caller into `app_dir`), a private /tmp, and one bash session over a
    root of system folders only (see `bwrap_argv`).

    `app_dir` may be given to reuse an existing folder (the verifier runs on the agent's final /app);
    the sandbox then never deletes it.
    """

    def __init__(
        self,
        app_dir: Path | None = None,
        env: dict[str, str] | None = None,
        mounts: list[Mount] | None = None,
        hidden: list[Path] | None = None,
        limits: Limits | None = None,
        output_cap: int = 16_384,
        timeout: float = 30.0,
        workdir: str = "/app",
    ):
        _sweep_once()
        self.workspace = Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-"))
        self.app_dir = app_dir or self.workspace / "app"
        self._owns_app = app_dir is None
        self.env = {**DEFAULT_ENV, **(env or {})}
        self.mounts = mounts or []
        self.hidden = hidden or []
        self.limits, self.output_cap, self.timeout, self.workdir = limits or Limits(), output_cap, timeout, workdir
        self.uid = NOBODY if as_root() else os.getuid()
        self.uploads: list[Mount] = []
        self._shell: Shell | None = None
        for sub in ("app", "tmp", "state"):
            (self.workspace / sub).mkdir(exist_ok=True)

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Begin a session: a fresh shell with an empty /tmp and no saved cwd or exports. /app and the
        uploaded folders stay (the verifier starts a new session over the agent's final /app)."""
        self.stop()
        for sub in ("tmp", "state"):
            shutil.rmtree(self.workspace / sub, ignore_errors=True)
            (self.workspace / sub).mkdir()
        if as_root():
            chown_tree(self.app_dir, self.uid)
            for sub in ("tmp", "state"):
                os.chown(self.workspace / sub, self.uid, self.uid)
            for mount in self.mounts:
                if mount.writable:
                    chown_tree(mount.host, self.uid)
        self._spawn()

    def _spawn(self) -> None:
        mounts = [Mount(self.app_dir, "/app", True), Mount(self.workspace / "tmp", "/tmp", True),
                  Mount(self.workspace / "state", STATE_DIR, True), *self.mounts, *self.uploads]
        fd = program_fd()
        try:
            argv = bwrap_argv(mounts, self.hidden, self.env, self.workdir, self.uid, seccomp_fd=fd)
            self._shell = Shell(argv, self.limits.ulimit_script(), pass_fds=(fd,))
            ready = self._shell.read_until_sentinel(time.monotonic() + 30, CappedOutput(4096))
        except (OSError, ShellDied, ValueError) as e:
            raise SandboxError(f"the sandbox shell did not start: {e}") from e
        finally:
            os.close(fd)
        if ready is None:
            raise SandboxError("the sandbox shell did not start within 30 s")

    def close(self) -> None:
        """Kill every process in the sandbox, then remove its temporary folders. Idempotent."""
        self.stop()
        if self.workspace.exists():
            shutil.rmtree(self.workspace, ignore_errors=True)

    def stop(self) -> None:
        """Kill every process but keep the files (the verifier reads the final /app)."""
        if self._shell is not None:
            self._shell.kill()
            self._shell = None

    # -- commands (the loop itself is ShellCommands') ----------------------------------------------
    def _restart(self) -> None:
        """A new shell in the same /app and /tmp, with the last saved cwd and exports."""
        self.stop()
        self._spawn()

    # -- host folders in and out (copies, never binds of the host's own files) -----------------------
    def upload(self, source: Path, dest: str) -> None:
        """Copy the host folder `source` to `dest` in the sandbox, owned by the sandbox's uid, so that a
        0700 root-owned tests/ or solution/ is readable inside, as under Harbor. A running shell is
        restarted (cwd and exports kept) to see it."""
        if not dest.startswith("/") or dest.rstrip("/") in ("", "/tmp", STATE_DIR):
            raise SandboxError(f"upload to {dest!r}: expected an absolute path in the sandbox other than / and /tmp")
        if dest == "/app" or dest.startswith("/app/"):
            staged = self.app_dir / dest.removeprefix("/app").lstrip("/")
        else:
            staged = self.workspace / "files" / str(len(self.uploads))
            self.uploads.append(Mount(staged, dest, True))
        shutil.copytree(source, staged, symlinks=True, dirs_exist_ok=True)
        if as_root():
            chown_tree(staged, self.uid)
        if self._shell is not None:
            self._restart()

    def download(self, source: str, dest: Path) -> None:
        """Copy the sandbox folder `source` (under /app, /tmp or an uploaded folder) to the host folder
        `dest`. Symlinks are copied as links, never followed on the host."""
        mounts = [Mount(self.app_dir, "/app"), Mount(self.workspace / "tmp", "/tmp"), *self.uploads]
        owner = max((m for m in mounts if source == m.dest or source.startswith(m.dest.rstrip("/") + "/")),
                    key=lambda m: len(m.dest), default=None)
        if owner is None:
            raise SandboxError(f"download of {source!r}: only /app, /tmp and uploaded folders can be copied out")
        root = owner.host.resolve()
        host = (owner.host / source.removeprefix(owner.dest).lstrip("/")).resolve()
        if host != root and root not in host.parents:  # a symlink in the path leads out of the sandbox
            raise SandboxError(f"download of {source!r}: the path leaves its folder through a symlink")
        shutil.copytree(host, dest, symlinks=True, dirs_exist_ok=True)


def chown_tree(root: Path, uid: int) -> None:
    """Give the sandbox uid its files; never follow symlinks (they may point anywhere on the host)."""
    os.chown(root, uid, uid, follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
