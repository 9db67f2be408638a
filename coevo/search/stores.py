"""The URLs of a search's two stores, the Optuna storage (`storage:` / `--storage`) and the MLflow tracking
URI (`tracking_uri:` / `--tracking-uri`): what is valid, how a URL reaches its driver, and how it is shown.

- A bad URL is refused when the config is read, before any compute, with the flag and what is valid.
- `postgresql://` means SQLAlchemy's default driver, psycopg2; coevo ships psycopg 3, so a URL without a
  driver is given `+psycopg` on its way to SQLAlchemy (an explicit `postgresql+psycopg2://` is kept).
- A password in a URL is masked wherever a URL is shown: MLflow params and tags, errors, log lines.
  Better still, keep it out of the URL (PGPASSWORD, ~/.pgpass): the run folder's config.yaml holds the
  URL as given, since workers read it from there.
"""

from __future__ import annotations

import re

STORAGE_SCHEMES = ("sqlite", "postgresql", "mysql")
TRACKING_SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "file", "databricks")
VALID = {
    "storage": "sqlite:///PATH, postgresql://USER@HOST:PORT/DB or mysql://USER@HOST/DB (any SQLAlchemy URL "
               "of these; a driver may follow the name, as in postgresql+psycopg://)",
    "tracking_uri": "http(s)://HOST:PORT (an MLflow server), sqlite:///PATH, postgresql://USER@HOST/DB, "
                    "mysql://..., file:///PATH or databricks",
}
FLAGS = {"storage": "--storage", "tracking_uri": "--tracking-uri"}
_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*):([^@\s]*)@", re.IGNORECASE)


def redact(text: str) -> str:
    """Every `scheme://user:password@` in `text` with the password masked."""
    return _PASSWORD.sub(r"\1:***@", text)


def check_url(field: str, url: str) -> str:
    """`url` if it is a valid value of `storage` or `tracking_uri`, else a ValueError naming the key, the
    flag and what is valid (with the password masked)."""
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else url.split(":", 1)[0].lower()
    valid = STORAGE_SCHEMES if field == "storage" else TRACKING_SCHEMES
    problem = None
    if scheme not in valid:
        problem = f"unknown scheme {scheme!r}" if ":" in url else "not a URL"
    elif field == "storage" or scheme in STORAGE_SCHEMES:
        problem = _sqlalchemy_problem(url)
    if problem:
        raise ValueError(f"{field} ({FLAGS[field]}) {redact(url)!r}: {problem}; valid: {VALID[field]}")
    return url


def _sqlalchemy_problem(url: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return "not a SQLAlchemy URL"
    try:
        parsed.get_dialect()
    except ArgumentError:  # NoSuchModuleError: mysql+nothing://, a typo'd driver
        return f"SQLAlchemy has no database driver {parsed.drivername!r}"
    if parsed.get_backend_name() != "sqlite" and not (parsed.host and parsed.database):
        return "a server URL needs a host and a database name"
    if parsed.get_backend_name() == "sqlite" and not parsed.database:
        return "a sqlite URL needs a file path (sqlite:///PATH)"
    return None


def engine_url(url: str) -> str:
    """The URL as SQLAlchemy should open it: `postgresql://` goes through psycopg 3, which coevo ships."""
    return "postgresql+psycopg://" + url.removeprefix("postgresql://") if url.startswith("postgresql://") else url


def probe_server(url: str) -> str:
    """Reach a store that is not a local file (`coevo check`): an MLflow server answers /health, a database
    runs `SELECT 1`. A ValueError says which store did not answer, and why, with the password masked."""
    try:
        if url.startswith(("http://", "https://")):
            import urllib.request

            with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=10) as response:
                return f"{redact(url)}: answers (HTTP {response.status})"
        from sqlalchemy import create_engine, text

        engine = create_engine(engine_url(url), connect_args={"connect_timeout": 10} if "postgresql" in url else {})
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        finally:
            engine.dispose()
        return f"{redact(url)}: connected"
    except Exception as e:  # noqa: BLE001 - boundary: any failure to reach it is the check's answer
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"{redact(url)}: cannot reach it: {redact(why)}") from None
