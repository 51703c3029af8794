"""Loopback plumbing shared by the HTTP benchmarks: a service process, a fast client, CPU time.

Each benchmark that goes over HTTP runs the service as its own process (`uvicorn --factory`), so
the client never shares its GIL, and reads that process's CPU time from `/proc`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from reasoning_service.testing.live_server import free_port

__all__ = [
    "BenchClient",
    "BenchResponse",
    "bench_process",
    "cpu_s",
    "service_process",
    "wait_until_up",
]


@dataclass(frozen=True)
class BenchResponse:
    status: int
    retry_after: str | None
    body: Any


class BenchClient:
    """aiohttp when installed (the `bench` extra), else httpx.

    httpx's connection pool costs grow with the requests in flight: 300 concurrent requests to
    a server answering after 0.5 s took 11.6 s with httpx and 1.3 s with aiohttp on this machine,
    so with httpx the client, not the service, would be measured at the higher levels.
    """

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        try:
            import aiohttp
        except ImportError:
            self.kind = f"httpx {httpx.__version__}"
            limits = httpx.Limits(max_connections=2000, max_keepalive_connections=2000)
            self._httpx = httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits)
            self._aiohttp = None
        else:
            self.kind = f"aiohttp {aiohttp.__version__}"
            self._aiohttp = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=2000),
                timeout=aiohttp.ClientTimeout(total=600),
            )

    async def post_json(self, path: str, body: dict[str, Any]) -> BenchResponse:
        """POST `body` as JSON; the answer's status, Retry-After header and JSON body."""
        if self._aiohttp is not None:
            async with self._aiohttp.post(self._base_url + path, json=body) as response:
                answer = await response.json(content_type=None)
                return BenchResponse(response.status, response.headers.get("Retry-After"), answer)
        reply = await self._httpx.post(path, json=body)
        return BenchResponse(reply.status_code, reply.headers.get("Retry-After"), reply.json())

    async def __aenter__(self) -> BenchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._aiohttp is not None:
            await self._aiohttp.close()
        else:
            await self._httpx.aclose()


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used (/proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def bench_process(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    # stderr goes to a file: a pipe nobody reads could fill up and stall the process
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)
        process.log = log  # type: ignore[attr-defined]
        try:
            yield process
        finally:
            _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_until_up(
    process: subprocess.Popen[bytes],
    url: str,
    *,
    expect_any: bool = False,
    timeout_s: float = 60,
    probe_timeout_s: float = 1,
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = process.log  # type: ignore[attr-defined]
            log.seek(0)
            stderr = log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(process.args[:4])} exited: {stderr}")  # type: ignore[index]
        try:
            response = httpx.get(url, timeout=probe_timeout_s)
            if expect_any or response.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not come up in {timeout_s} s")


@contextmanager
def service_process(env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """The service under uvicorn on a free loopback port, auth off: (base URL, pid).

    `env` adds `REASONING_*` settings (the database path at least) to this process's
    environment."""
    port = free_port()
    env = {**os.environ, "REASONING_AUTH": "off", "REASONING_LOG_LEVEL": "WARNING", **env}
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "reasoning_service.api.app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
        "--no-access-log", "--backlog", "4096", "--timeout-keep-alive", "60",
    ]  # fmt: skip
    # keep-alive past uvicorn's 5 s: callers that wait out a Retry-After reuse pooled
    # connections, and one the server had just closed showed up as a reset (ClientOSError)
    with bench_process(command, env) as process:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(process, f"{url}/healthz")
        yield url, process.pid
