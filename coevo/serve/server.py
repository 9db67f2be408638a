"""A uvicorn server in a background thread, for callers in the same process: tests, the benchmark, and
native agents whose model is served from the checkpoint being searched or trained."""

from __future__ import annotations

import threading
import time
from typing import Self


class ServerThread:
    """`with ServerThread(app) as server:` serves on 127.0.0.1 at a free port until the block ends."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 30.0):
        import uvicorn

        self.app, self.host, self.start_timeout_s = app, host, start_timeout_s
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                                    access_log=False, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, name="coevo-serve", daemon=True)
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"coevo serve did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def __exit__(self, *exc) -> None:
        self.close()
