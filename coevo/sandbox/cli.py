"""`coevo sandbox`: the docker backend's housekeeping (the base image for air-gapped machines, and the
removal of containers left by killed runs). Heavy imports stay inside the commands."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True, help="Docker sandboxes: the air-gapped base image, and pruning.")

# The options every command that runs episodes shares (eval, tasks check, warmstart, train).
BackendOption = Annotated[str, typer.Option(
    help="Sandbox backend: local (bubblewrap over the host), docker (an image per task), or auto (docker "
         "for a task whose Dockerfile needs a build or that names docker_image, local otherwise).")]
ImageMapOption = Annotated[list[str] | None, typer.Option(
    "--image-map", help="FROM-NAME=LOCAL-IMAGE for docker builds, repeatable, e.g. "
                        "python:3.12-slim=coevo-base:bookworm (added to COEVO_IMAGE_MAP).")]


def image_map_from(items: list[str] | None) -> dict[str, str] | None:
    """--image-map entries over COEVO_IMAGE_MAP's; None without the flag (the backend reads the variable)."""
    from coevo.sandbox.images import default_image_map, parse_image_map

    return {**default_image_map(), **parse_image_map(items)} if items else None


def checked_backends(tasks: list, backend: str) -> None:
    """Fail before any episode when the backend cannot run these tasks; under auto, say what it chose."""
    from coevo.sandbox import backends_for

    chosen = backends_for(tasks, backend)
    if backend == "auto":
        counts = Counter(chosen.values())
        typer.echo("sandboxes: " + ", ".join(f"{name} for {n} task(s)" for name, n in sorted(counts.items())),
                   err=True)


@app.command()
def base(
    tag: str = typer.Option("coevo-base:bookworm", help="Tag of the image to build."),
    suite: str = typer.Option("bookworm", help="Debian suite for debootstrap."),
    mirror: str = typer.Option("http://deb.debian.org/debian", help="Debian package mirror."),
    force: bool = typer.Option(False, "--force", help="Build it again even if the tag exists (the tag moves to "
                                                      "the new image; task images on the old one are rebuilt)."),
) -> None:
    """Build a Debian base image from debootstrap, once (needs root and the package mirror). Then map
    FROM names to it: COEVO_IMAGE_MAP="python:3.12-slim=coevo-base:bookworm,ubuntu:24.04=coevo-base:bookworm"."""
    from coevo.sandbox.docker_io import docker_client
    from coevo.sandbox.images import build_base

    built = build_base(docker_client(), tag=tag, suite=suite, mirror=mirror, force=force)
    typer.echo(f"{tag}: {'built' if built else 'already there, nothing to do'}")


@app.command()
def prune(
    everything: bool = typer.Option(False, "--all", help="Also containers of live runs and of other hosts."),
) -> None:
    """Remove coevo's containers whose run was killed (its process on this host is gone)."""
    from coevo.sandbox.docker_io import cleanup_orphans, docker_client

    removed = cleanup_orphans(docker_client(), everything=everything)
    typer.echo(f"removed {len(removed)} container(s)" + (f": {', '.join(removed)}" if removed else ""))
