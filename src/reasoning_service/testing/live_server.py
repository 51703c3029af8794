"""Run any ASGI app (the service itself) under uvicorn on 127.0.0.1 in a background thread.

Tests and benchmarks talk to it over real HTTP, lifespan included; `stop()` is a clean
shutdown, so a second `LiveServer` on the same database is a service restart.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    """`with LiveServer(app) as server: httpx.get(server.url + "/healthz")`."""

    def __init__(
        self, app: object, *, port: int | None = None, startup_timeout_s: float = 30
    ) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._timeout_s = startup_timeout_s

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + self._timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server exited during start-up")
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not start in time")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=self._timeout_s)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
