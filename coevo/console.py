"""Rich progress for long work, shared by every command. Log lines go through coevo/logs.py; a bar shares
its console, so lines print above the bar."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress(description: str, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr (none under -q); yields `advance()`. Thread-safe, so pool workers may call it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from coevo import logs

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=logs.console(), transient=False, disable=not logs.shows()) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)
