"""Where progress and diagnostics go: Python `logging`, under the "coevo" logger.

    console   stderr, at the level -v/-q chose (INFO; -v: DEBUG; -q: WARNING, and no progress bars). Rich on a
              terminal; plain lines when stderr is a pipe or a file, so nothing is wrapped or coloured
    file      `to_file(RUN/search.log)` for `coevo search`: DEBUG and up, whatever the console shows

Library code only logs (`logging.getLogger(__name__)`); the CLI calls `setup`, and so may a script. A
message written in rich markup says so with `extra=MARKUP`; a plain console and the file get its text.
What a command exists to print (a table, JSON, a path) is not a log line: it goes to stdout as before.

Only `logging` is imported here at module level, so `coevo --help` stays fast.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = "coevo"
MARKUP = {"markup": True}
"""`log.info("[bold]step 3[/]", extra=MARKUP)`: the message is rich markup."""
FILE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(process)d] %(message)s"

_console = None


def console():
    """The one rich console on stderr that log lines and progress bars share (a bar stays below the lines)."""
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(stderr=True)
    return _console


class PlainFormatter(logging.Formatter):
    """Plain text: markup stripped from MARKUP messages; on the console, 'warning: ' before a warning."""

    def __init__(self, fmt: str | None = None, prefix_level: bool = False):
        super().__init__(fmt)
        self.prefix_level = prefix_level

    def formatMessage(self, record: logging.LogRecord) -> str:
        if getattr(record, "markup", False):
            from rich.text import Text

            record = logging.makeLogRecord({**record.__dict__, "message": Text.from_markup(record.message).plain})
        text = super().formatMessage(record)
        if self.prefix_level and record.levelno != logging.INFO:
            text = f"{record.levelname.lower()}: {text}"
        return text


def level_of(verbosity: int) -> int:
    """-q is -1, nothing 0, -v 1 (or more)."""
    return logging.WARNING if verbosity < 0 else logging.INFO if verbosity == 0 else logging.DEBUG


def setup(verbosity: int = 0) -> None:
    """The console handler at `level_of(verbosity)`; called again, it replaces the earlier one."""
    logger = logging.getLogger(ROOT)
    for old in [h for h in logger.handlers if getattr(h, "coevo_console", False)]:
        logger.removeHandler(old)
    if console().is_terminal:
        from rich.logging import RichHandler

        handler = RichHandler(console=console(), show_path=False, log_time_format="[%X]")
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(PlainFormatter("%(message)s", prefix_level=True))
    handler.setLevel(level_of(verbosity))
    handler.coevo_console = True
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)  # each handler filters for itself: the file takes DEBUG under -q
    logger.propagate = False


def shows(level: int = logging.INFO) -> bool:
    """Whether the console shows `level`: progress bars are drawn only when INFO is (not under -q). Without
    `setup` (a library caller, a test) there is no console handler, and bars are drawn."""
    handlers = [h for h in logging.getLogger(ROOT).handlers if getattr(h, "coevo_console", False)]
    return not handlers or any(level >= h.level for h in handlers)


@contextmanager
def library_bars_off() -> Iterator[None]:
    """transformers' and datasets' own tqdm bars (loading weights, mapping a dataset, writing shards) off
    while the block runs: training shows one bar of ours. Also a decorator."""
    import datasets
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled(), datasets.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bar()
    try:
        yield
    finally:
        if was[0]:
            hf_logging.enable_progress_bar()
        if was[1]:
            datasets.enable_progress_bar()


@contextmanager
def to_file(path: Path) -> Iterator[Path]:
    """Append every coevo log record, DEBUG and up, to `path` while the block runs (the console's level
    does not matter). Several processes may append to one file: each line names its process."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(PlainFormatter(FILE_FORMAT))
    handler.setLevel(logging.DEBUG)
    logger = logging.getLogger(ROOT)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(level)
