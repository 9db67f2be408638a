"""Real servers for the scale-out tests and benchmarks/workers.py: a throwaway PostgreSQL cluster on
127.0.0.1 (initdb + pg_ctl) and an MLflow tracking server whose backend store is a database in it.

PostgreSQL refuses to run as root, so when the tests run as root the cluster runs as the `postgres` user
that Debian's package creates (or `nobody`), through `setpriv`. Its folder lives under /tmp, not under
pytest's 0700 tmp folder, which that user could not enter. The cluster asks for a password (scram), so
the tests also see where a password in a storage URL goes.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

PASSWORD = "s3cret-pw"
"""The cluster's password: a test asserts it appears in no log and no MLflow param."""


def pg_bin(name: str) -> str:
    """A PostgreSQL program: on PATH, or in Debian's versioned folder (`.ci/setup` installs it)."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))[-1:]), None)
    if found is None:
        raise RuntimeError(f"{name} not found: install PostgreSQL (`.ci/setup` does: apt-get install postgresql)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    """initdb'd into a fresh folder, started on a free port, stopped and deleted by `close()`."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="coevo-pg-"))
        self.data, self.port = self.folder / "data", free_port()
        self.as_user: list[str] = []
        if os.getuid() == 0:
            user = _unprivileged_user()
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self.as_user = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
        (self.folder / "pw").write_text(PASSWORD)
        if self.as_user:
            os.chown(self.folder / "pw", user.pw_uid, user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "coevo", "--auth=scram-sha-256",
                  f"--pwfile={self.folder / 'pw'}", "-E", "UTF8", "--no-sync")
        self.start()
        for db in ("optuna", "mlflow"):
            self.sql(f"CREATE DATABASE {db}")

    def _run(self, program: str, *args: str) -> None:
        result = subprocess.run([*self.as_user, pg_bin(program), *args], capture_output=True, text=True,
                                cwd=self.folder, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)}: {result.stdout[-2000:]}{result.stderr[-2000:]}")

    def start(self) -> None:
        # fsync off: a throwaway cluster; the sockets go to our folder, not /var/run/postgresql.
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "log"), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, db: str = "optuna") -> str:
        return f"postgresql://coevo:{PASSWORD}@127.0.0.1:{self.port}/{db}"

    def sql(self, statement: str, db: str = "postgres") -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as con:
            cursor = con.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def close(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def _unprivileged_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return pwd.getpwnam("nobody")


class MlflowServer:
    """`mlflow server` on 127.0.0.1 against a PostgreSQL database, serving artifacts from a folder."""

    def __init__(self, backend_uri: str, artifacts: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        artifacts.mkdir(parents=True, exist_ok=True)
        self.log = artifacts / "server.log"
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        mlflow = Path(sys.executable).parent / "mlflow"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [str(mlflow), "server", "--backend-store-uri", backend_uri.replace("postgresql://",
                                                                                   "postgresql+psycopg://"),
                 "--artifacts-destination", artifacts.as_uri(), "--host", "127.0.0.1", "--port", str(self.port),
                 "--workers", "1"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready(300)  # its schema migrations take 20 s on an idle machine, minutes on a busy one

    def _wait_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.close()
        raise RuntimeError(f"mlflow server not ready after {seconds}s: {self.log.read_text()[-3000:]}")

    def close(self) -> None:
        """Stop the server and the uvicorn processes it started (its own session)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


@contextmanager
def postgres_and_mlflow():
    """(cluster, MLflow server URL) for the duration of the block; both stopped afterwards."""
    cluster = PostgresCluster()
    server = None
    try:
        server = MlflowServer(cluster.url("mlflow"), cluster.folder.parent / f"{cluster.folder.name}-artifacts")
        yield cluster, server.url
    finally:
        if server is not None:
            server.close()
        cluster.close()
        shutil.rmtree(cluster.folder.parent / f"{cluster.folder.name}-artifacts", ignore_errors=True)
