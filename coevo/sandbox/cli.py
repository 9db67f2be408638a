"""`coevo sandbox`: the docker backend's housekeeping (the base image for air-gapped machines, and the
removal of containers left by killed runs). Heavy imports stay inside the commands."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Docker sandboxes: the air-gapped base image, and pruning.")


@app.command()
def base(
    tag: str = typer.Option("coevo-base:bookworm", help="Tag of the image to build."),
    suite: str = typer.Option("bookworm", help="Debian suite for debootstrap."),
    mirror: str = typer.Option("http://deb.debian.org/debian", help="Debian package mirror."),
) -> None:
    """Build a Debian base image from debootstrap, once (needs root and the package mirror). Then map
    FROM names to it: COEVO_IMAGE_MAP="python:3.12-slim=coevo-base:bookworm,ubuntu:24.04=coevo-base:bookworm"."""
    from coevo.sandbox.docker_io import docker_client
    from coevo.sandbox.images import build_base

    built = build_base(docker_client(), tag=tag, suite=suite, mirror=mirror)
    typer.echo(f"{tag}: {'built' if built else 'already there, nothing to do'}")


@app.command()
def prune(
    everything: bool = typer.Option(False, "--all", help="Also containers of live runs and of other hosts."),
) -> None:
    """Remove coevo's containers whose run was killed (its process on this host is gone)."""
    from coevo.sandbox.docker_io import cleanup_orphans, docker_client

    removed = cleanup_orphans(docker_client(), everything=everything)
    typer.echo(f"removed {len(removed)} container(s)" + (f": {', '.join(removed)}" if removed else ""))
