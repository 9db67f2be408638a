"""Write-ahead logging for the run folder's sqlite stores (Optuna and MLflow).

In sqlite's default rollback-journal mode a reader holds a lock that blocks every writer's commit, so one
worker reading the study (or stalled mid-read) makes a second worker's writes wait, then fail with
"database is locked". In WAL mode readers and a writer never block each other; only writers queue.
The mode is stored in the database file, so setting it once, before the store opens it, is enough.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

PREFIX = "sqlite:///"


def enable_wal(url: str) -> None:
    """Put the sqlite database behind `url` in WAL mode; other URLs (postgresql://, mysql://) are left alone."""
    if not url.startswith(PREFIX) or url[len(PREFIX):] in ("", ":memory:"):
        return
    path = Path(url[len(PREFIX):])
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, timeout=60)) as con:  # sqlite3's own `with` commits but never closes
        con.execute("PRAGMA journal_mode=WAL")
