"""Item 3: many evaluations in flight through the HTTP API, against an LLM with a fixed delay.

Three processes, so none shares a GIL: the scripted LLM (`bench.llm_server`, answering after
`delay_s`), the service (`uvicorn --factory …create_app`, ReAct controller, auth off, its own
SQLite file), and this client, which fires N one-criterion evaluations at once per level.

Per level: wall time, throughput and its fraction of the ideal (every evaluation takes exactly
`iterations × delay_s`, all in parallel), p50/p95 latency, errors, and the service's resident
memory (sampled every 50 ms; the peak over the level, and the process high-water mark).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from reasoning_service.bench.data import BenchData
from reasoning_service.bench.stats import percentile, rss_mb
from reasoning_service.testing.live_server import free_port

__all__ = ["run_concurrency"]


async def run_concurrency(data: BenchData, *, levels: list[int], delay_s: float) -> dict[str, Any]:
    """Run each level in turn against one service process; see the module docstring."""
    examples = data.examples
    with (
        tempfile.TemporaryDirectory() as tmp,
        _llm_process(delay_s) as (
            llm_url,
            llm_pid,
        ),
        _service_process(Path(tmp), llm_url, data.data_dir) as (service_url, pid),
    ):
        async with _Client(service_url) as client:
            await _evaluate(client, examples[0])  # warm-up: imports, connections, first write
            idle = rss_mb(pid)
            rows = []
            for level in levels:
                rows.append(await _level(client, examples, level, delay_s, pid, llm_pid))
    return {
        "what": "N one-criterion evaluations at once through POST /v1/evaluations (ReAct, "
        "scripted LLM answering after delay_s); ideal wall = iterations × delay_s",
        "delay_s": delay_s,
        "client": client.kind,
        "service_rss_idle_mb": idle.get("rss_mb"),
        "levels": rows,
    }


async def _level(
    client: _Client,
    examples: list[Any],
    level: int,
    delay_s: float,
    pid: int,
    llm_pid: int,
) -> dict[str, Any]:
    peak = 0.0
    cpu_before = (_cpu_s(pid), _cpu_s(llm_pid), time.process_time())
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mb(pid).get("rss_mb", 0.0))
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    outcomes = await asyncio.gather(
        *(_evaluate(client, examples[i % len(examples)]) for i in range(level))
    )
    wall_s = time.perf_counter() - started
    done.set()
    await sampler
    service_cpu_s = _cpu_s(pid) - cpu_before[0]
    llm_cpu_s = _cpu_s(llm_pid) - cpu_before[1]
    client_cpu_s = time.process_time() - cpu_before[2]
    latencies = [latency for latency, _, error in outcomes if error is None]
    calls = [n for _, n, error in outcomes if error is None]
    errors: dict[str, int] = {}
    for _, _, error in outcomes:
        if error is not None:
            errors[error] = errors.get(error, 0) + 1
    iterations = max(calls) if calls else 0
    ideal_s = iterations * delay_s
    memory = rss_mb(pid)
    return {
        "concurrency": level,
        "ok": len(latencies),
        "errors": level - len(latencies),
        "error_kinds": errors,
        "llm_calls_per_evaluation": round(sum(calls) / len(calls), 2) if calls else 0,
        "wall_s": round(wall_s, 3),
        "throughput_per_s": round(len(latencies) / wall_s, 2),
        "ideal_throughput_per_s": round(level / ideal_s, 2) if ideal_s else None,
        "fraction_of_ideal": round(ideal_s / wall_s, 3) if ideal_s else None,
        "latency_p50_s": round(percentile(latencies, 50), 3),
        "latency_p95_s": round(percentile(latencies, 95), 3),
        "latency_max_s": round(max(latencies), 3) if latencies else 0.0,
        "service_cpu_ms_per_evaluation": round(service_cpu_s * 1000 / level, 1),
        "scripted_llm_cpu_ms_per_evaluation": round(llm_cpu_s * 1000 / level, 1),
        "client_cpu_ms_per_evaluation": round(client_cpu_s * 1000 / level, 1),
        "service_rss_peak_mb": round(max(peak, memory.get("rss_mb", 0.0)), 1),
        "service_rss_after_mb": memory.get("rss_mb"),
        "service_rss_high_water_mb": memory.get("peak_rss_mb"),
    }


class _Client:
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

    async def post_json(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if self._aiohttp is not None:
            async with self._aiohttp.post(self._base_url + path, json=body) as response:
                return response.status, await response.json(content_type=None)
        response = await self._httpx.post(path, json=body)
        return response.status_code, response.json()

    async def __aenter__(self) -> _Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._aiohttp is not None:
            await self._aiohttp.close()
        else:
            await self._httpx.aclose()


async def _evaluate(client: _Client, example: Any) -> tuple[float, int, str | None]:
    """(latency, LLM calls, None) for a stored evaluation, else the error's kind last."""
    body = {
        "case": example.case.model_dump(mode="json", exclude_none=True),
        "policy_id": example.policy_id,
        "criterion_ids": [example.criterion_id],
    }
    started = time.perf_counter()
    try:
        status, answer = await client.post_json("/v1/evaluations", body)
    except Exception as exc:  # a refused or reset connection is a failed evaluation, counted
        return time.perf_counter() - started, 0, type(exc).__name__
    latency = time.perf_counter() - started
    if status != 201:
        return latency, 0, f"HTTP {status}"
    result = answer["results"][0]
    if result.get("reason_code") in ("llm_fallback", "llm_transient_error"):
        return latency, 0, f"result {result['reason_code']}"
    return latency, int(result["usage"]["llm_calls"]), None


def _cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used (/proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _llm_process(delay_s: float) -> Iterator[tuple[str, int]]:
    port = free_port()
    command = [sys.executable, "-m", "reasoning_service.bench.llm_server", "--port", str(port)]
    with _process([*command, "--delay", str(delay_s)], os.environ.copy()) as process:
        _wait_until_up(process, f"http://127.0.0.1:{port}/v1/chat/completions", expect_any=True)
        yield f"http://127.0.0.1:{port}/v1", process.pid


@contextmanager
def _service_process(tmp: Path, llm_url: str, data_dir: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = {
        **os.environ,
        "REASONING_DB_PATH": str(tmp / "service.db"),
        "REASONING_CONTROLLER": "react",
        "REASONING_LLM_PROVIDER": "openai",
        "REASONING_LLM_MODEL": "bench-model",
        "REASONING_LLM_BASE_URL": llm_url,
        "REASONING_LLM_API_KEY": "sk-bench-not-a-key",
        "REASONING_LLM_TIMEOUT_S": "300",
        "REASONING_TREE_SEARCH": "lexical",
        "REASONING_EXAMPLES_DIR": str(data_dir),
        "REASONING_AUTH": "off",
        "REASONING_LOG_LEVEL": "WARNING",
    }
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "reasoning_service.api.app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
        "--no-access-log", "--backlog", "4096",
    ]  # fmt: skip
    with _process(command, env) as process:
        url = f"http://127.0.0.1:{port}"
        _wait_until_up(process, f"{url}/healthz")
        yield url, process.pid


@contextmanager
def _process(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
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


def _wait_until_up(
    process: subprocess.Popen[bytes], url: str, *, expect_any: bool = False, timeout_s: float = 60
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = process.log  # type: ignore[attr-defined]
            log.seek(0)
            stderr = log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(process.args[:4])} exited: {stderr}")  # type: ignore[index]
        try:
            response = httpx.get(url, timeout=1)
            if expect_any or response.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not come up in {timeout_s} s")
