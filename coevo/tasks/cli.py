"""`coevo tasks list | generate | check`. Heavy work is imported inside the commands."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from coevo.sandbox.cli import BackendOption, ImageMapOption

app = typer.Typer(no_args_is_help=True)
TASKS = Path("tasks")


def fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)


@app.command("list")
def list_tasks(
    path: Annotated[Path, typer.Argument(help="Folder of tasks (with manifest.json) or a task folder.")] = TASKS,
    split: Annotated[str, typer.Option(help="train, dev, test or all.")] = "all",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")] = False,
) -> None:
    """List the tasks of a folder, with family and split."""
    from rich.console import Console
    from rich.table import Table

    from coevo.errors import CoevoError
    from coevo.tasks import load_taskset

    try:
        tasks = load_taskset(path).split(split)
    except CoevoError as e:
        fail(str(e))
    if as_json:
        print(json.dumps([{"name": t.name, "family": t.family, "split": t.split} for t in tasks], indent=1))
        return
    table = Table("task", "family", "split", title=f"{len(tasks)} tasks in {path} (split: {split})")
    for t in tasks:
        table.add_row(t.name, t.family, t.split or "-")
    Console().print(table)


@app.command()
def generate(
    out: Annotated[Path, typer.Option(help="Where to write the task folders and manifest.json.")] = TASKS,
    seed: Annotated[int, typer.Option(help="Same seed, same bytes.")] = 0,
    per_family: Annotated[int, typer.Option(min=1, help="Instances per family.")] = 13,
) -> None:
    """Generate the bundled task suite (procedural families, train/dev/test splits)."""
    from collections import Counter

    from coevo.tasks.generate import generate_suite

    rows = generate_suite(out, seed=seed, per_family=per_family)
    splits = Counter(r["split"] for r in rows)
    families = len({r["family"] for r in rows})
    print(f"wrote {len(rows)} tasks from {families} families to {out}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(splits.items())))


@app.command()
def check(
    paths: Annotated[list[Path] | None, typer.Argument(help="Task folders or folders of tasks.")] = None,
    jobs: Annotated[int, typer.Option(help="Tasks checked in parallel.")] = os.cpu_count() or 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON, for scripts.")] = False,
    backend: BackendOption = "local",
    image_map: ImageMapOption = None,
) -> None:
    """Check that each task's reference solution scores 1 and doing nothing scores 0."""
    from coevo.console import progress
    from coevo.errors import CoevoError
    from coevo.sandbox import backends_for
    from coevo.sandbox.cli import image_map_from
    from coevo.tasks.check import check_folders, print_check_table, task_folders

    try:
        # A task the backend refuses is a row of the report; only a missing engine stops the whole check.
        backends_for([], backend)
        mapping = image_map_from(image_map)
        folders = task_folders(paths or [TASKS])
        if as_json:
            rows = check_folders(folders, jobs, backend=backend, image_map=mapping)
            print(json.dumps([r.as_dict() for r in rows], indent=1))
        else:
            with progress("checking tasks", total=len(folders)) as advance:
                rows = check_folders(folders, jobs, on_done=lambda row: advance(), backend=backend,
                                     image_map=mapping)
            print_check_table(rows)
    except (CoevoError, ValueError) as e:
        fail(str(e))
    if not all(r.ok for r in rows):
        raise typer.Exit(1)
