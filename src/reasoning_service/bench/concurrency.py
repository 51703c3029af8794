"""Item 3: many evaluations in flight through the HTTP API, against an LLM with a fixed delay.

Three processes, so none shares a GIL: the scripted LLM (`bench.llm_server`, answering after
`delay_s`), the service (`uvicorn --factory …create_app`, ReAct controller, auth off, its own
SQLite file, admitting the largest level at once), and this client, which fires N one-criterion
evaluations at once per level.

Per level: wall time, throughput and its fraction of the ideal (every evaluation takes exactly
`iterations × delay_s`, all in parallel), p50/p95 latency, errors, and the service's resident
memory (sampled every 50 ms; the peak over the level, and the process high-water mark).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from reasoning_service.bench.data import BenchData
from reasoning_service.bench.live import (
    BenchClient,
    bench_process,
    cpu_s,
    service_process,
    wait_until_up,
)
from reasoning_service.bench.stats import percentile, rss_mb
from reasoning_service.testing.live_server import free_port

__all__ = ["evaluate_one", "run_concurrency", "scripted_llm_process"]


async def run_concurrency(data: BenchData, *, levels: list[int], delay_s: float) -> dict[str, Any]:
    """Run each level in turn against one service process; see the module docstring."""
    examples = data.examples
    in_flight = max(levels)
    with (
        tempfile.TemporaryDirectory() as tmp,
        scripted_llm_process(delay_s) as (llm_url, llm_pid),
        _service_process(Path(tmp), llm_url, data.data_dir, in_flight) as (service_url, pid),
    ):
        async with BenchClient(service_url) as client:
            await evaluate_one(client, examples[0])  # warm-up: imports, connections, first write
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
    client: BenchClient,
    examples: list[Any],
    level: int,
    delay_s: float,
    pid: int,
    llm_pid: int,
) -> dict[str, Any]:
    peak = 0.0
    cpu_before = (cpu_s(pid), cpu_s(llm_pid), time.process_time())
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mb(pid).get("rss_mb", 0.0))
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    outcomes = await asyncio.gather(
        *(evaluate_one(client, examples[i % len(examples)]) for i in range(level))
    )
    wall_s = time.perf_counter() - started
    done.set()
    await sampler
    service_cpu_s = cpu_s(pid) - cpu_before[0]
    llm_cpu_s = cpu_s(llm_pid) - cpu_before[1]
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


async def evaluate_one(client: BenchClient, example: Any) -> tuple[float, int, str | None]:
    """(latency, LLM calls, None) for a stored evaluation, else the error's kind last."""
    body = {
        "case": example.case.model_dump(mode="json", exclude_none=True),
        "policy_id": example.policy_id,
        "criterion_ids": [example.criterion_id],
    }
    started = time.perf_counter()
    try:
        response = await client.post_json("/v1/evaluations", body)
    except Exception as exc:  # a refused or reset connection is a failed evaluation, counted
        return time.perf_counter() - started, 0, type(exc).__name__
    latency = time.perf_counter() - started
    if response.status != 201:
        return latency, 0, f"HTTP {response.status}"
    result = response.body["results"][0]
    if result.get("reason_code") in ("llm_fallback", "llm_transient_error"):
        return latency, 0, f"result {result['reason_code']}"
    return latency, int(result["usage"]["llm_calls"]), None


@contextmanager
def scripted_llm_process(delay_s: float, *, processes: int = 1) -> Iterator[tuple[str, int]]:
    """The scripted LLM answering after `delay_s`: (base URL, pid of its first process).
    With `processes` > 1, that many share the port."""
    port = free_port()
    command = [sys.executable, "-m", "reasoning_service.bench.llm_server", "--port", str(port)]
    command += ["--delay", str(delay_s), *(["--reuse-port"] if processes > 1 else [])]
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    with ExitStack() as stack:
        started = [
            stack.enter_context(bench_process(command, os.environ.copy())) for _ in range(processes)
        ]
        for process in started:  # it answers every request after the delay, probes too
            wait_until_up(process, url, expect_any=True, probe_timeout_s=delay_s + 2)
        yield f"http://127.0.0.1:{port}/v1", started[0].pid


def react_on_scripted_llm(llm_url: str, *, in_flight: int) -> dict[str, str]:
    """The service's environment for the ReAct loop on the scripted LLM at `llm_url`.

    LLM-bound evaluations mostly wait on the network: admit the whole level at once, as a
    react deployment would configure it (item 7 measures the CPU-bound default)."""
    return {
        "REASONING_CONTROLLER": "react",
        "REASONING_LLM_PROVIDER": "openai",
        "REASONING_LLM_MODEL": "bench-model",
        "REASONING_LLM_BASE_URL": llm_url,
        "REASONING_LLM_API_KEY": "sk-bench-not-a-key",
        "REASONING_LLM_TIMEOUT_S": "300",
        "REASONING_TREE_SEARCH": "lexical",
        "REASONING_MAX_EVALUATIONS_IN_PROGRESS": str(in_flight),
    }


def _service_process(
    tmp: Path, llm_url: str, data_dir: Path, in_flight: int
) -> AbstractContextManager[tuple[str, int]]:
    return service_process(
        {
            **react_on_scripted_llm(llm_url, in_flight=in_flight),
            "REASONING_DB_PATH": str(tmp / "service.db"),
            "REASONING_EXAMPLES_DIR": str(data_dir),
        }
    )
