"""Item 9: evaluations in flight beyond one process (issue 14).

The docker-compose topology as processes on this machine — API replicas and workers on one
throwaway PostgreSQL (`bench.cluster`) — against the scripted LLM of item 3 (`bench.llm_server`,
answering after `delay_s`), with the ReAct controller. At one level of evaluations in flight,
four rows measured in the same run (the scripted LLM runs as two processes on one port, so
that 500 replies due at the same moment do not queue behind its own single event loop):

- one API process, synchronous evaluations (the baseline: item 3's shape, on PostgreSQL);
- the API replicas, synchronous evaluations spread over them;
- asynchronous evaluations submitted through the replicas and run by one worker, then by
  `workers`, from the first submission to the last stored result (read from the database:
  polling every job through the API would cost the CPU the workers need). A worker holds at
  most `REASONING_WORKER_CONCURRENCY` (≤ 256) jobs at once.

Each row reports its wall time, its fraction of the ideal (every evaluation takes exactly
`iterations × delay_s`, all in parallel), failures, the CPU the service's processes spent per
evaluation, and how busy the machine's cores were meanwhile: near 1.0, the row was bound by this
machine's CPU (the service, PostgreSQL, the scripted LLM and this client share its cores), not by
the service's design. Skipped where PostgreSQL is not installed.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from reasoning_service.bench.cluster import Cluster, cluster
from reasoning_service.bench.concurrency import (
    evaluate_one,
    react_on_scripted_llm,
    scripted_llm_process,
)
from reasoning_service.bench.data import BenchData
from reasoning_service.bench.live import BenchClient, cpu_s
from reasoning_service.bench.stats import busy_share, machine_cpu_jiffies
from reasoning_service.testing.postgres import TemporaryPostgres, find_postgres_bin

__all__ = ["run_scale_out"]

_POLL_S = 0.05


async def run_scale_out(
    data: BenchData, *, in_flight: int, delay_s: float, replicas: int = 2, workers: int = 2
) -> dict[str, Any]:
    """Run the three rows at `in_flight`; see the module docstring."""
    what = (
        f"{in_flight} one-criterion evaluations at once (ReAct, scripted LLM answering after "
        f"delay_s) on PostgreSQL: 1 API process, {replicas} API replicas, 1 and {workers} "
        "workers behind the replicas; ideal wall = iterations × delay_s"
    )
    if find_postgres_bin() is None:
        return {"what": what, "skipped": "PostgreSQL is not installed (pg_ctl, initdb)"}
    rows = []
    with TemporaryPostgres() as server, scripted_llm_process(delay_s, processes=2) as (llm_url, _):
        env = _service_env(llm_url, in_flight=in_flight, workers=workers)
        shapes = [(1, 0), (replicas, 0), *((replicas, n) for n in sorted({1, workers}))]
        for apis, running_workers in shapes:
            mode = "async" if running_workers else "sync"
            url = server.create_database()
            with cluster(
                url, apis=apis, workers=running_workers, examples_dir=data.data_dir, env=env
            ) as running:
                level = _sync_level if mode == "sync" else _async_level
                row = await level(running, data, in_flight, delay_s)
            rows.append({"api_processes": apis, "workers": running_workers, "mode": mode, **row})
    return {"what": what, "delay_s": delay_s, "in_flight": in_flight, "rows": rows}


def _service_env(llm_url: str, *, in_flight: int, workers: int) -> dict[str, str]:
    # Each worker holds its share of the level at once.
    share = min(256, math.ceil(in_flight / max(workers, 1)))
    return {
        **react_on_scripted_llm(llm_url, in_flight=in_flight),
        "REASONING_WORKER_CONCURRENCY": str(share),
    }


async def _sync_level(
    running: Cluster, data: BenchData, in_flight: int, delay_s: float
) -> dict[str, Any]:
    examples = data.examples
    async with _clients(running) as clients:
        for client in clients:  # warm-up: imports, connections, first write
            await evaluate_one(client, examples[0])
        meter = _Meter.start(running)
        outcomes = await asyncio.gather(
            *(
                evaluate_one(clients[n % len(clients)], examples[n % len(examples)])
                for n in range(in_flight)
            )
        )
        wall_s, service_cpu_s, machine = meter.stop()
    calls = [n for _, n, error in outcomes if error is None]
    return _row(
        ok=len(calls),
        failed=in_flight - len(calls),
        iterations=max(calls, default=0),
        wall_s=wall_s,
        delay_s=delay_s,
        service_cpu_s=service_cpu_s,
        machine_busy=machine,
    )


async def _async_level(
    running: Cluster, data: BenchData, in_flight: int, delay_s: float
) -> dict[str, Any]:
    examples = data.examples
    async with _clients(running) as clients:
        await _submit(clients[0], examples[0])  # warm-up: a worker takes and runs one job
        await _wait_for_results(running.database_url, 1, timeout_s=120)
        meter = _Meter.start(running)
        await asyncio.gather(
            *(
                _submit(clients[n % len(clients)], examples[n % len(examples)])
                for n in range(in_flight)
            )
        )
        submitted_s = time.perf_counter() - meter.started
        stored, failed = await _wait_for_results(
            running.database_url, in_flight + 1, timeout_s=60 + 20 * in_flight * delay_s
        )
        wall_s, service_cpu_s, machine = meter.stop()
    return {
        **_row(
            ok=stored - 1,
            failed=failed,
            iterations=await asyncio.to_thread(_max_llm_calls, running.database_url),
            wall_s=wall_s,
            delay_s=delay_s,
            service_cpu_s=service_cpu_s,
            machine_busy=machine,
        ),
        "submit_s": round(submitted_s, 3),
    }


@asynccontextmanager
async def _clients(running: Cluster) -> AsyncIterator[list[BenchClient]]:
    """One client per API process, closed at the end."""
    clients = [BenchClient(url) for url in running.api_urls]
    try:
        yield clients
    finally:
        for client in clients:
            await client.__aexit__()


@dataclass(frozen=True)
class _Meter:
    """Wall time, the service processes' CPU and the machine's busy share of one measured run."""

    cpu_before: dict[int, float]
    machine_before: tuple[int, int]
    started: float

    @classmethod
    def start(cls, running: Cluster) -> _Meter:
        cpu_before = {pid: cpu_s(pid) for pid in running.service_pids()}
        return cls(cpu_before, machine_cpu_jiffies(), time.perf_counter())

    def stop(self) -> tuple[float, float, float | None]:
        """(wall seconds, service CPU seconds, machine busy share) since `start`."""
        wall_s = time.perf_counter() - self.started
        machine = busy_share(self.machine_before, machine_cpu_jiffies())
        cpu = sum(cpu_s(pid) - before for pid, before in self.cpu_before.items())
        return wall_s, cpu, machine


async def _submit(client: BenchClient, example: Any) -> None:
    body = {
        "case": example.case.model_dump(mode="json", exclude_none=True),
        "policy_id": example.policy_id,
        "criterion_ids": [example.criterion_id],
        "mode": "async",
    }
    response = await client.post_json("/v1/evaluations", body)
    if response.status != 202:
        raise RuntimeError(f"async submission: HTTP {response.status}: {response.body}")


async def _wait_for_results(database_url: str, jobs: int, *, timeout_s: float) -> tuple[int, int]:
    """(evaluations stored by jobs, jobs failed) once they add up to `jobs`, or at the timeout."""
    deadline = time.monotonic() + timeout_s
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        while True:
            stored = await _count(conn, "select count(*) from evaluations where job_id is not null")
            failed = await _count(
                conn, "select count(*) from procrastinate_jobs where status = 'failed'"
            )
            if stored + failed >= jobs or time.monotonic() > deadline:
                return stored, failed
            await asyncio.sleep(_POLL_S)


async def _count(conn: psycopg.AsyncConnection[Any], sql: str) -> int:
    cursor = await conn.execute(sql)
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


def _max_llm_calls(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "select max(n) from (select count(*) as n from llm_interactions group by "
            "evaluation_id, criterion_id) as calls"
        ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _row(
    *,
    ok: int,
    failed: int,
    iterations: int,
    wall_s: float,
    delay_s: float,
    service_cpu_s: float,
    machine_busy: float | None,
) -> dict[str, Any]:
    ideal_s = iterations * delay_s
    return {
        "ok": ok,
        "failed": failed,
        "llm_calls_max": iterations,
        "wall_s": round(wall_s, 3),
        "throughput_per_s": round(ok / wall_s, 2) if wall_s else 0.0,
        "fraction_of_ideal": round(ideal_s / wall_s, 3) if ideal_s and wall_s else None,
        "service_cpu_ms_per_evaluation": round(service_cpu_s * 1000 / ok, 1) if ok else None,
        "machine_cpu_busy": machine_busy,
    }


def main() -> None:  # pragma: no cover - by hand: `python -m reasoning_service.bench.scale_out`
    import json
    import sys

    from reasoning_service.bench.data import load_bench_data

    in_flight = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    result = asyncio.run(run_scale_out(load_bench_data(None), in_flight=in_flight, delay_s=delay))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
