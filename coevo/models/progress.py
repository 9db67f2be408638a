"""One Rich display on stderr for a pull or an import: a row per step (download, assemble, dequantize, save)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Steps:
    """`with steps.step("download x", total=None) as advance:`; a step without a total pulses until done."""

    def __init__(self, bar=None):
        self.bar = bar

    @contextmanager
    def step(self, description: str, total: float | None = None) -> Iterator[Callable[[float], None]]:
        if self.bar is None:
            yield lambda n=1: None
            return
        task = self.bar.add_task(description, total=total)
        yield lambda n=1: self.bar.advance(task, n)
        self.bar.update(task, total=total or 1, completed=total or 1)


@contextmanager
def steps(show: bool = True) -> Iterator[Steps]:
    if not show:
        yield Steps()
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        yield Steps(bar)


@contextmanager
def counted_tensors(advance: Callable[[float], None]) -> Iterator[None]:
    """transformers dequantizes a GGUF's tensors under a tqdm bar of its own, which no setting turns off.
    Swap its module's `tqdm` for a loop that advances our row instead, for the length of the load."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    original = gguf_utils.tqdm

    def counted(iterable, **_):
        for item in iterable:
            yield item
            advance(1)

    gguf_utils.tqdm = counted
    try:
        yield
    finally:
        gguf_utils.tqdm = original


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' own bars (loading weights, writing shards) would interleave with ours."""
    from transformers.utils import logging

    was = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            logging.enable_progress_bar()
