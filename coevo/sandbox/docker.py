"""The docker backend: one container per episode, and one persistent bash in it.

The bash runs the local backend's sentinel loop (shell.py), driven over one `docker exec -i` socket:
a command costs a write and a read on that socket, not an exec. Files go in and out through the
engine's archive API, so nothing of the host is ever mounted. Isolation comes from the engine:
no network, all capabilities dropped but the few the harness's own root commands need,
no-new-privileges, and cgroup limits (cpus, memory, pids) from task.toml's [environment].

How a timed-out command dies: `kill -9 -1`, run as the agent's user, kills every process the agent
started. It spares PID 1, a small sh loop that reaps orphans (as an init does) and restarts its one
`sleep` if that was killed too, so the container, its /tmp and its saved cwd/exports live on.
"""

from __future__ import annotations

import functools
import secrets
import shlex
import time

from coevo.errors import SandboxError
from coevo.sandbox.docker_io import (
    LABEL,
    DockerShell,
    cleanup_orphans,
    docker_client,
    extract_archive,
    owner_labels,
    pack_folder,
)
from coevo.sandbox.shell import STATE_DIR, CappedOutput, ShellCommands, ShellDied
from coevo.tasks.task import Task

DEFAULT_USER = "65534:65534"  # nobody, as in the local backend, unless the image's USER names one
# PID 1: `wait` collects any child, so orphans the kernel hands to PID 1 are reaped, not left as zombies.
INIT = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 2147483647 & wait $!; done"]
# Only for the harness's root commands (uploads, chown, wiping /logs/verifier) and for root tasks'
# apt-get, which drops to the _apt user. Non-root processes hold no capabilities at all.
CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID"]
ENV = {"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "LANG": "C.UTF-8"}


@functools.cache
def _prune_once() -> None:
    cleanup_orphans(docker_client())


def image_user(client, image: str) -> str:
    """The image's USER; for a task image coevo built, the one its label keeps (its last layer ran as root)."""
    from coevo.sandbox.images import USER_LABEL

    config = client.images.get(image).attrs["Config"]
    return (config.get("Labels") or {}).get(USER_LABEL, config.get("User") or "")


class DockerSandbox(ShellCommands):
    """An unstarted container for one episode; `start` creates it (or restarts it after `stop`)."""

    def __init__(self, image: str, *, cpus: float = 1.0, memory_mb: int = 2048, pids: int = 256,
                 cpu_sec: int = 600, workdir: str = "/app", user: str | None = None, network: bool = False,
                 labels: dict[str, str] | None = None, output_cap: int = 16_384, timeout: float = 30.0):
        self.client = docker_client()
        self.image, self.workdir, self.network = image, workdir, network
        self.cpus, self.memory_mb, self.pids, self.cpu_sec = cpus, memory_mb, pids, cpu_sec
        self.user = user or image_user(self.client, image) or DEFAULT_USER
        self.labels = {LABEL: "1", **(labels or {})}
        self.output_cap, self.timeout = output_cap, timeout
        self.container = None
        self._shell: DockerShell | None = None
        self._pending: list[tuple] = []
        self._prepared = False

    @classmethod
    def for_task(cls, task: Task, image_map: dict[str, str] | None = None, run_id: str | None = None,
                 **options) -> DockerSandbox:
        """The task's image (built once per context hash) with the limits of its task.toml."""
        from coevo.sandbox.images import default_image_map, ensure_image

        _prune_once()
        image = ensure_image(docker_client(), task, default_image_map() if image_map is None else image_map)
        env = task.config.environment
        extra = env.model_extra or {}
        workdir = docker_client().images.get(image.tag).attrs["Config"].get("WorkingDir") or "/app"
        labels = {"coevo.task": task.name, "coevo.run": run_id or RUN_ID,
                  "coevo.episode": f"{task.name}-{secrets.token_hex(4)}"}
        return cls(image.tag, cpus=env.cpus, memory_mb=env.memory_mb, pids=int(extra.get("pids", 256)),
                   cpu_sec=int(max(60, task.config.agent.timeout_sec)), workdir=workdir, labels=labels,
                   network=bool(extra.get("allow_internet", False)), **options)

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Begin a session: a fresh shell, an empty /tmp (a new tmpfs) and no saved cwd or exports."""
        self.stop()
        if self.container is None:
            self.container = self._create()
        self.container.start()
        setup = [f"rm -rf {STATE_DIR}", f"mkdir -p {STATE_DIR} {shlex.quote(self.workdir)}",
                 f"chown {shlex.quote(self.user)} {STATE_DIR}"]
        if not self._prepared and self._user_is_not_root():  # as the local backend: /app is the agent's
            setup.append(f"chown -R {shlex.quote(self.user)} /app {shlex.quote(self.workdir)}")
        self._as_root(" && ".join(setup))
        self._prepared = True
        for source, dest in self._pending:
            self._put(source, dest)
        self._pending.clear()
        self._spawn()

    def _create(self):
        memory = f"{self.memory_mb}m"
        return self.client.containers.create(
            self.image, command=INIT, entrypoint=[], user="0", environment=self._env(), labels={**self.labels, **owner_labels()},
            network_mode="bridge" if self.network else "none", hostname="sandbox",
            cap_drop=["ALL"], cap_add=CAPS, security_opt=["no-new-privileges"],
            pids_limit=self.pids, mem_limit=memory, nano_cpus=int(self.cpus * 1e9),
            tmpfs={"/tmp": "rw,exec,nosuid,nodev,mode=1777"},
            sysctls={"net.ipv4.ping_group_range": "1 0"})  # no ICMP sockets (docker allows them by default)

    def _env(self) -> dict[str, str]:
        return {**ENV, "HOME": "/tmp"} if self.user == DEFAULT_USER else dict(ENV)

    def _spawn(self) -> None:
        self.container.reload()
        try:
            self._shell = DockerShell(self.client.api, self.container.id, self.user, self.workdir,
                                      self._ulimits(), self.container.attrs["State"]["Pid"])
            ready = self._shell.read_until_sentinel(time.monotonic() + 30, CappedOutput(4096))
        except (OSError, ShellDied) as e:
            raise SandboxError(f"the shell in image {self.image} did not start (it needs bash): {e}") from e
        if ready is None:
            raise SandboxError(f"the shell in image {self.image} did not start within 30 s")

    def _ulimits(self) -> str:
        """Per-process limits under the cgroup's; RLIMIT_NPROC leaves room for the harness's execs."""
        return f"ulimit -t {self.cpu_sec}; ulimit -f {1 << 20}; ulimit -u {max(16, self.pids - 32)}"

    def stop(self) -> None:
        """Kill every process (the container's init, hence its pid namespace); files stay."""
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        if self.container is not None:
            self.container.reload()
            if self.container.status == "running":
                self.container.kill()
                self.container.wait()

    def close(self) -> None:
        """Remove the container and everything in it. Idempotent."""
        import docker.errors

        if self.container is not None:
            try:
                self.stop()  # waits for the exit of init, hence of its whole pid namespace
                self.container.remove(force=True)
            except docker.errors.NotFound:
                pass
            self.container = None

    # -- commands (the loop itself is ShellCommands') ----------------------------------------------
    def _restart(self) -> None:
        """Kill all the agent's processes, then a new shell with the saved cwd and exports. When even
        that cannot start (a fork bomb holds every pid), the container restarts: /tmp is then lost."""
        self._shell.close()
        self._shell = None
        code, _ = self.container.exec_run(
            ["sh", "-c", "i=0; while [ $i -lt 50 ] && kill -9 -1 2>/dev/null; do i=$((i+1)); done"],
            user=self.user)
        if code != 0:
            self.container.kill()
            self.container.wait()
            self.container.start()
        self._spawn()

    def _as_root(self, script: str) -> str:
        code, output = self.container.exec_run(["sh", "-c", script], user="0")
        if code != 0:
            raise SandboxError(f"sandbox setup failed ({script}): {output.decode(errors='replace')[-500:]}")
        return output.decode(errors="replace")

    def _user_is_not_root(self) -> bool:
        return self.user.split(":")[0] not in ("0", "root")

    # -- host folders in and out (archives through the engine, never mounts) --------------------------
    def upload(self, source, dest: str) -> None:
        """Copy the host folder `source` to `dest`, owned by the sandbox's user. A folder outside /app is
        replaced, not merged (what the agent left at /tests or /logs/verifier is gone). Before `start`,
        the copy waits for the container."""
        if not dest.startswith("/") or dest.rstrip("/") in ("", "/tmp", STATE_DIR):
            raise SandboxError(f"upload to {dest!r}: expected an absolute path in the sandbox other than / and /tmp")
        if self.container is not None and self._shell is not None:
            self._put(source, dest)
        else:
            self._pending.append((source, dest))

    def _put(self, source, dest: str) -> None:
        quoted, user = shlex.quote(dest), shlex.quote(self.user)
        wipe = "" if dest == "/app" or dest.startswith("/app/") else f"rm -rf -- {quoted} && "
        self._as_root(f"{wipe}mkdir -p -- {quoted}")
        if not self.container.put_archive(dest, pack_folder(source)):
            raise SandboxError(f"upload of {source} to {dest!r} failed")
        self._as_root(f"chown -R {user} -- {quoted}")

    def download(self, source: str, dest) -> None:
        """Copy the sandbox folder `source` to the host folder `dest`; links stay links, and nothing is
        written through a link on the host."""
        import docker.errors

        if self.container is None:
            raise SandboxError(f"download of {source!r}: the sandbox was never started")
        try:
            stream, _ = self.container.get_archive(source)
        except docker.errors.NotFound as e:
            raise SandboxError(f"download of {source!r}: no such path in the sandbox") from e
        extract_archive(stream, dest)



RUN_ID = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
"""This process's run, on its containers' labels (`coevo.run`)."""
