"""Images for the docker backend: one per task build context, built once and cached by its hash.

- A task's `environment/` folder is the build context. Its tag is `coevo-env:<hash>`, where the hash
  covers every file of the context (path, mode, bytes) and the Dockerfile after the image map, so a
  second run builds nothing and any edit builds anew.
- A file lock per hash: 16 episodes starting at once build the image once; the others wait and reuse it.
- `docker_image` in task.toml names a prebuilt image, used as is (Harbor's convention).
- Builds use the host network, so that `RUN apt-get` and `RUN pip` work; containers get none.
- The image map points FROM names at local images on machines that cannot pull
  (`python:3.12-slim=coevo-base:bookworm`); every use prints a one-line notice.
- No setuid or setgid file survives a build: the base's rootfs is stripped before import, and each
  task image gets one last layer that strips what its `RUN apt-get` added (a `su` or `mount` the agent
  could exec is attack surface, even under no-new-privileges). The image's USER is kept as a label,
  `coevo.user`, since that layer has to run as root.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from coevo.errors import SandboxError
from coevo.tasks.dockerfile import _logical_lines
from coevo.tasks.task import Task

IMAGE_REPO = "coevo-env"
IMAGE_VERSION = "strip-setid-1"
"""Hashed into every task image's tag: a change to how coevo finishes an image builds each anew."""
STRIP_SETID = "find / -xdev -perm /6000 -exec chmod ug-s {} +"
"""Clears setuid/setgid bits on every file and folder of the image's own filesystem."""
USER_LABEL = "coevo.user"
"""The task image's own USER (empty: none), set by the strip layer, which itself runs as root."""
LOCK_DIR = Path(os.environ.get("COEVO_LOCK_DIR", Path(tempfile.gettempdir()) / "coevo-image-locks"))
IMAGE_MAP_ENV = "COEVO_IMAGE_MAP"
LOG_TAIL_LINES = 20
_FROM = re.compile(r"^(\s*FROM\s+(?:--platform=\S+\s+)?)(\S+)(.*)$", re.IGNORECASE | re.MULTILINE)


class ImageBuildError(SandboxError):
    """A task's image did not build: an environment error of the task, never the agent's failure."""


@dataclass(frozen=True)
class Image:
    tag: str
    built: bool
    """True when this call built it; False when it came from the cache or task.toml's docker_image."""


def parse_image_map(items: list[str] | str | None) -> dict[str, str]:
    """`["python:3.12-slim=coevo-base:bookworm", ...]` or one comma-separated string -> {FROM: local}."""
    if isinstance(items, str):
        items = [part for part in items.split(",") if part.strip()]
    mapping = {}
    for item in items or []:
        name, sep, local = item.strip().partition("=")
        if not sep or not name or not local:
            raise ValueError(f"image map entry {item!r}: expected FROM-NAME=LOCAL-IMAGE, such as "
                             "python:3.12-slim=coevo-base:bookworm")
        mapping[name] = local
    return mapping


def default_image_map() -> dict[str, str]:
    """The map from the environment (COEVO_IMAGE_MAP="a=b,c=d"), for commands without a flag for it."""
    return parse_image_map(os.environ.get(IMAGE_MAP_ENV, ""))


def map_dockerfile(text: str, image_map: dict[str, str]) -> tuple[str, list[tuple[str, str]]]:
    """The Dockerfile with mapped FROM names replaced, and the (from, to) pairs that were used."""
    used: list[tuple[str, str]] = []

    def swap(match: re.Match) -> str:
        name = match.group(2)
        if name not in image_map:
            return match.group(0)
        used.append((name, image_map[name]))
        return f"{match.group(1)}{image_map[name]}{match.group(3)}"

    return _FROM.sub(swap, text), used


def context_hash(context: Path, dockerfile_text: str) -> str:
    """A hash of the build context: every file's relative path, mode and bytes (links by target)."""
    digest = hashlib.sha256(dockerfile_text.encode())
    for path in sorted(context.rglob("*")):
        rel = path.relative_to(context).as_posix()
        if rel == "Dockerfile":
            continue  # hashed above, after the image map
        info = path.lstat()
        digest.update(f"\0{rel}\0{info.st_mode:o}\0".encode())
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@contextmanager
def hash_lock(key: str) -> Iterator[None]:
    """An exclusive file lock per key, across threads and processes (flock is per open file)."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOCK_DIR / f"{key}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_image(client, task: Task, image_map: dict[str, str] | None = None) -> Image:
    """The image for `task`: task.toml's docker_image, else its environment/ built once per hash."""
    prebuilt = task.config.environment.docker_image
    if prebuilt:
        _notice_mapped([(prebuilt, image_map[prebuilt])] if image_map and prebuilt in image_map else [])
        return Image(require_image(client, (image_map or {}).get(prebuilt, prebuilt), task), built=False)
    dockerfile = task.path / "environment" / "Dockerfile"
    text, used = map_dockerfile(dockerfile.read_text(), image_map or {})
    _notice_mapped(used)
    tag = f"{IMAGE_REPO}:{context_hash(dockerfile.parent, text + base_ids(client, text) + IMAGE_VERSION)}"
    if image_exists(client, tag):
        return Image(tag, built=False)
    with hash_lock(tag.replace(":", "-")):
        if image_exists(client, tag):  # another episode built it while we waited
            return Image(tag, built=False)
        build_image(client, task, text, tag)
    return Image(tag, built=True)


def base_ids(client, dockerfile_text: str) -> str:
    """The ids of the FROM images present here, so that a rebuilt base (say `coevo sandbox base` after
    its package list changed) gives new tags instead of images on the old base."""
    import docker.errors

    ids = []
    for match in _FROM.finditer(dockerfile_text):
        try:
            ids.append(client.images.get(match.group(2)).id)
        except docker.errors.ImageNotFound:
            ids.append(match.group(2))  # pulled at build time; its name is all we know
    return "\n".join(ids)


def image_exists(client, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def require_image(client, name: str, task: Task) -> str:
    """A prebuilt image: present locally, else pulled; an error names task.toml's field otherwise."""
    import docker.errors

    if image_exists(client, name):
        return name
    try:
        client.images.pull(name)
    except docker.errors.APIError as e:
        raise ImageBuildError(
            f"task {task.name}: {task.path / 'task.toml'}: environment.docker_image = {name!r} is not on "
            f"this engine and cannot be pulled ({e.explanation or e}); build or load it first, or map it "
            f"to a local image with {IMAGE_MAP_ENV}='{name}=coevo-base:bookworm'") from e
    return name


def build_image(client, task: Task, dockerfile_text: str, tag: str) -> None:
    """Build `tag` from the task's environment/ with the (mapped) Dockerfile, then clear its setid bits;
    errors name the line."""
    context = task.path / "environment"
    timeout = float(task.config.environment.model_extra.get("build_timeout_sec", 1800))
    with tempfile.TemporaryDirectory(prefix="coevo-build-") as tmp:
        mapped = Path(tmp) / "Dockerfile"  # outside the context: the SDK adds it under a private name
        mapped.write_text(dockerfile_text)
        stage, step, log = _build(client, task, path=str(context), dockerfile=str(mapped), network_mode="host",
                                  timeout=timeout)
        if not stage:
            raise ImageBuildError(build_failure(task, dockerfile_text, step, log))
        user = client.images.get(stage).attrs["Config"].get("User") or ""
        strip = Path(tmp) / "strip"
        strip.mkdir()
        (strip / "Dockerfile").write_text(strip_dockerfile(stage, user))
        image, _, log = _build(client, task, path=str(strip), tag=tag, network_mode="none", timeout=timeout)
        if not image:
            tail = "\n    ".join(log[-LOG_TAIL_LINES:])
            raise ImageBuildError(
                f"task {task.name}: {context / 'Dockerfile'}: the image built, but coevo could not clear its "
                f"setuid/setgid bits (`{STRIP_SETID}` as root needs /bin/sh and find in the image); the last "
                f"lines of that step's log:\n    {tail}")


def strip_dockerfile(image: str, user: str) -> str:
    """The last layer of every task image: no setid file, and the image's own USER kept (and labelled)."""
    restore = f"USER {user}\n" if user else ""
    return f"FROM {image}\nUSER 0\nRUN {STRIP_SETID}\n{restore}LABEL {USER_LABEL}={json.dumps(user)}\n"


def _build(client, task: Task, **options) -> tuple[str, str, list[str]]:
    """One `docker build`: (the image id, or "" when it failed; the last 'Step' line; the log)."""
    log: list[str] = []
    step, image = "", ""
    stream = client.api.build(rm=True, forcerm=True, pull=False, decode=True, labels={"coevo.task": task.name},
                              **options)
    for chunk in stream:
        for line in chunk.get("stream", "").splitlines():
            log.append(line)
            step = line if line.startswith("Step ") else step
            image = line.split()[-1] if line.startswith("Successfully built ") else image
        image = chunk.get("aux", {}).get("ID", image)
        if "error" in chunk:
            log.append(chunk["error"].strip())
            return "", step, log
    return image, step, log


def build_failure(task: Task, dockerfile_text: str, step: str, log: list[str]) -> str:
    """'task T: environment/Dockerfile, line N: <instruction> failed to build' + the log's tail."""
    where = f"task {task.name}: {task.path / 'environment' / 'Dockerfile'}"
    match = re.match(r"Step (\d+)/\d+ : (.*)", step)
    if match:
        lines = _logical_lines(dockerfile_text)
        index = int(match.group(1)) - 1
        number = lines[index][0] if index < len(lines) else "?"
        where += f", line {number}: {match.group(2)}"
    tail = "\n    ".join(log[-LOG_TAIL_LINES:])
    return f"{where}: the image build failed; the last lines of the build log:\n    {tail}"


_noticed: set[tuple[str, str]] = set()
log = logging.getLogger(__name__)


def _notice_mapped(pairs: list[tuple[str, str]]) -> None:
    """One line per mapped base and process, so that nobody mistakes the local base for the real one."""
    for name, local in pairs:
        if (name, local) not in _noticed:
            _noticed.add((name, local))
            log.warning(f"image map: FROM {name} uses the local image {local}")



# -- the air-gapped base image ---------------------------------------------------------------------
BASE_TAG = "coevo-base:bookworm"
BASE_PACKAGES = "bash,coreutils,procps,git,python3,python3-pip,python3-pytest,python-is-python3,ca-certificates"
HOST_CAS = Path("/usr/local/share/ca-certificates")
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def build_base(client, tag: str = BASE_TAG, suite: str = "bookworm",
               mirror: str = "http://deb.debian.org/debian", force: bool = False) -> bool:
    """Make `tag` from a debootstrap'ed Debian rootfs, once (False when it exists already and not `force`).

    The host's own CA certificates go in, so that `RUN pip install` works behind the same TLS
    interception as the host; PEP 668's marker goes out, so that `pip install` works as it does in
    python:*-slim images; every setuid/setgid bit goes (su, mount, passwd, ...). With `force` the tag
    moves to a new image; task images built on the old one are rebuilt on next use (their tag hashes
    the base's id).
    """
    import shutil
    import subprocess

    if image_exists(client, tag) and not force:
        return False
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        raise SandboxError(f"building {tag} needs root and debootstrap: sudo apt-get install -y debootstrap, "
                           "then run `sudo coevo sandbox base` again")
    with hash_lock(tag.replace(":", "-").replace("/", "-")):
        if image_exists(client, tag) and not force:
            return False
        with tempfile.TemporaryDirectory(prefix="coevo-base-", dir="/var/tmp") as tmp:
            rootfs, tarball = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
            subprocess.run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", suite,
                            str(rootfs), mirror], check=True, stdout=subprocess.DEVNULL)
            _prepare_rootfs(rootfs)
            subprocess.run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
            repository, _, version = tag.partition(":")
            client.api.import_image_from_file(str(tarball), repository=repository, tag=version or "latest",
                                              changes=[f"ENV {PATH_ENV}", "ENV LANG=C.UTF-8", 'CMD ["bash"]'])
    return True


def _prepare_rootfs(rootfs: Path) -> None:
    import shutil
    import subprocess

    if HOST_CAS.is_dir():
        for cert in HOST_CAS.glob("*.crt"):
            shutil.copy2(cert, rootfs / "usr/local/share/ca-certificates" / cert.name)
        subprocess.run(["chroot", str(rootfs), "update-ca-certificates"], check=True, capture_output=True)
    for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    for deb in (rootfs / "var/cache/apt/archives").glob("*.deb"):
        deb.unlink()
    subprocess.run(["find", str(rootfs), "-xdev", "-perm", "/6000", "-exec", "chmod", "ug-s", "{}", "+"],
                   check=True)
