"""`coevo demos build|own`: demonstration pools for a harness's `demonstrations` section (coevo/harness/demos.py).

Only typer at module level: `coevo --help` must stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(no_args_is_help=True)


@app.command("build")
def build(
    tasks: Annotated[Path, typer.Argument(help="A folder of tasks with a manifest.json (its splits).")],
    out: Annotated[Path, typer.Option(help="The pool to write (JSONL).")],
    split: Annotated[str, typer.Option(help="Which split to replay; only train is accepted.")] = "train",
    per_family: Annotated[int, typer.Option(min=1, help="Shortest verified episodes kept per family.")] = 3,
    backend: Annotated[str, typer.Option(help="Sandbox backend: local, docker or auto.")] = "local",
) -> None:
    """Replay each task's solution/solve.sh in a real sandbox, keep the verified episodes, write the pool."""
    from coevo.errors import CoevoError
    from coevo.harness.demos import save_pool
    from coevo.harness.demos_build import build_pool, check_train_only
    from coevo.tasks import load_taskset

    try:
        taskset = load_taskset(tasks)
        chosen = taskset.split(split)
        check_train_only(chosen or taskset.tasks, f"coevo demos build --split {split}")
        demos, failed = build_pool(chosen, per_family, backend)
    except CoevoError as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    save_pool(out, demos)
    families = len({d.family for d in demos})
    typer.echo(f"{out}: {len(demos)} demonstrations of {families} families from {len(chosen)} {split} tasks "
               f"({failed} oracle episode(s) not verified, left out)")


@app.command("own")
def own(
    episodes: Annotated[list[Path], typer.Argument(help="Trajectory .jsonl files (an eval's or a harvest's).")],
    tasks: Annotated[Path, typer.Option(help="The task folder the episodes ran on (for families and splits).")],
    out: Annotated[Path, typer.Option(help="The pool to write (JSONL); set demonstrations.own_pool to it.")],
) -> None:
    """The model's own verified, submitted successes on train tasks, one per task, as a pool."""
    from coevo.errors import CoevoError
    from coevo.harness.demos import save_pool
    from coevo.harness.demos_build import own_demos
    from coevo.rollout.trajectory import load_trajectories
    from coevo.tasks import load_taskset

    try:
        trajectories = [t for f in episodes for t in load_trajectories(f)]
        demos = own_demos(trajectories, load_taskset(tasks).tasks)
    except (CoevoError, OSError, ValueError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from None
    save_pool(out, demos)
    typer.echo(f"{out}: {len(demos)} demonstrations from {len(trajectories)} episodes")
