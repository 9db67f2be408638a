"""Rich progress for long work, shared by every command."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr; yields `advance()`. Thread-safe, so pool workers may call it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)
