"""No setuid or setgid file in a docker sandbox's image: not in the air-gapped base (`coevo sandbox base`),
and not in a task image whose Dockerfile adds one. The image's own USER survives the stripping layer.
Real engine, real builds (the base must exist: .ci/setup builds it)."""

from __future__ import annotations

import secrets

import pytest

from coevo.sandbox import make_sandbox
from coevo.sandbox.docker import image_user
from coevo.sandbox.docker_io import docker_client
from coevo.sandbox.images import BASE_TAG, ensure_image
from coevo.tasks import load_task

IMAGE_MAP = {"debian:bookworm-slim": BASE_TAG}
SETID = "find / -xdev -perm /6000"


def setid_files(image: str) -> list[str]:
    """Every setuid/setgid file and folder of the image's own filesystem, searched as root."""
    out = docker_client().containers.run(image, ["sh", "-c", f"{SETID} 2>/dev/null; true"], user="0",
                                         entrypoint=[], network_mode="none", remove=True)
    return out.decode().split()


def test_the_base_image_has_no_setuid_or_setgid_file():
    assert setid_files(BASE_TAG) == []


@pytest.mark.parametrize("user", ["", "1000:1000"])
def test_a_task_image_that_adds_setid_files_has_none_and_keeps_its_user(make_task, user):
    dockerfile = ("FROM debian:bookworm-slim\nWORKDIR /app\nCOPY app/ /app/\n"
                  "RUN cp /bin/ls /usr/local/bin/suid-ls && chmod 4755 /usr/local/bin/suid-ls"
                  " && mkdir /srv/shared && chmod 2775 /srv/shared && chmod g+s /bin/cat\n"
                  + (f"USER {user}\n" if user else ""))
    task = load_task(make_task(f"setid-{user.split(':')[0] or 'root'}", dockerfile=dockerfile,
                               files={"environment/app/nonce.txt": secrets.token_hex(8)}))
    image = ensure_image(docker_client(), task, IMAGE_MAP)
    assert image.built and setid_files(image.tag) == []
    assert image_user(docker_client(), image.tag) == user
    with make_sandbox(task, backend="docker", image_map=IMAGE_MAP, timeout=20) as box:
        assert box.run("id -u").output.strip() == (user.split(":")[0] or "65534")
        assert box.run(f"{SETID} 2>/dev/null | wc -l").output.strip() == "0"
        assert box.run("test -x /usr/local/bin/suid-ls && cat /app/input.txt").output.strip() == "hello"
