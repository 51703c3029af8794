"""The docker-compose topology as processes on this machine: API replicas and workers on one
PostgreSQL, submitting asynchronous evaluations and waiting for every job (issue 14).

`run_jobs` submits N asynchronous evaluations of the bundled example case (conditions
controller) spread over the API replicas, optionally SIGKILLs one worker once some jobs are done,
polls every job until it is done or failed, and counts what came back against what was stored:
lost (a job never done), duplicated (a job with more than one stored evaluation), failed. It also
reports throughput and the CPU seconds the service's processes (API and workers) spent per
evaluation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from reasoning_service.bench.live import bench_process, cpu_s, wait_until_up
from reasoning_service.service.examples import load_example_cases
from reasoning_service.testing.live_server import free_port

__all__ = ["Cluster", "cluster", "run_jobs"]

_POLL_S = 0.5
_UNREACHABLE = "unreachable"
"""A status read whose connection dropped (seen once in CI with both cores busy; the cause is not
pinned down): the job is read again at the next poll, and the report counts the drops, so the
kill test judges the jobs, not one poll."""


@dataclass
class Cluster:
    """Running API replicas (URLs) and workers (processes), all on `database_url`."""

    database_url: str
    api_urls: list[str]
    api_pids: list[int]
    workers: list[Any] = field(default_factory=list)
    """`subprocess.Popen` of each worker."""

    def service_pids(self) -> list[int]:
        return [*self.api_pids, *(w.pid for w in self.workers if w.poll() is None)]


@contextlib.contextmanager
def cluster(
    database_url: str,
    *,
    apis: int,
    workers: int,
    examples_dir: Path,
    env: dict[str, str] | None = None,
) -> Iterator[Cluster]:
    """Start `apis` API processes (the first migrates and seeds before the others start) and
    `workers` worker processes; stop them all on exit."""
    base = {
        **os.environ,
        "REASONING_DATABASE_URL": database_url,
        "REASONING_AUTH": "off",
        "REASONING_CONTROLLER": "heuristic",
        "REASONING_EXAMPLES_DIR": str(examples_dir),
        "REASONING_LOG_LEVEL": "WARNING",
        "REASONING_WORKER_HEARTBEAT_S": "1",
        "REASONING_WORKER_STALLED_AFTER_S": "4",
        **(env or {}),
    }
    with contextlib.ExitStack() as stack:
        urls, pids = [], []
        for _ in range(apis):
            port = free_port()
            command = [
                sys.executable, "-m", "uvicorn", "--factory",
                "reasoning_service.api.app:create_app", "--host", "127.0.0.1", "--port",
                str(port), "--log-level", "warning", "--no-access-log",
            ]  # fmt: skip
            process = stack.enter_context(bench_process(command, base))
            url = f"http://127.0.0.1:{port}"
            wait_until_up(process, f"{url}/healthz")
            urls.append(url)
            pids.append(process.pid)
        running = Cluster(database_url, urls, pids)
        for n in range(workers):
            command = [sys.executable, "-m", "reasoning_service", "worker", "--name", f"w{n}"]
            running.workers.append(stack.enter_context(bench_process(command, base)))
        yield running


async def run_jobs(
    running: Cluster,
    *,
    jobs: int,
    examples_dir: Path,
    kill_worker_after: int | None = None,
    timeout_s: float = 600,
) -> dict[str, Any]:
    """Submit `jobs` asynchronous evaluations and wait for all; see the module docstring.

    `kill_worker_after`: SIGKILL the first worker once this many jobs are done."""
    example = load_example_cases(examples_dir)[0]
    case = json.loads((examples_dir / "cases" / example.file).read_text(encoding="utf-8"))
    body = {"case": case, "policy_id": example.policy_id, "mode": "async"}
    cpu_before = {pid: cpu_s(pid) for pid in running.service_pids()}
    started = time.perf_counter()
    stop_killer = threading.Event()
    killer = (
        asyncio.create_task(
            asyncio.to_thread(_kill_when_done, running, kill_worker_after, stop_killer)
        )
        if kill_worker_after is not None
        else None
    )
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=32)) as http:
        gate = asyncio.Semaphore(32)

        async def submit(n: int) -> str:
            async with gate:
                url = running.api_urls[n % len(running.api_urls)]
                reply = await http.post(
                    f"{url}/v1/evaluations", json=body, headers={"Idempotency-Key": f"job-{n}"}
                )
                if reply.status_code != 202:
                    raise RuntimeError(f"submission {n}: HTTP {reply.status_code}")
                return str(reply.json()["job_id"])

        job_ids = list(await asyncio.gather(*(submit(n) for n in range(jobs))))
        submitted_s = time.perf_counter() - started
        states: dict[str, str] = dict.fromkeys(job_ids, "queued")
        reads_dropped = 0
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pending = [j for j, s in states.items() if s not in ("done", "failed")]
            polled = await _states(http, running.api_urls[0], pending, gate)
            reads_dropped += sum(s == _UNREACHABLE for s in polled.values())
            states.update(polled)
            finished = sum(s in ("done", "failed") for s in states.values())
            if finished == len(job_ids):
                break
            # Polling costs the CPU the workers need: the more jobs open, the rarer.
            await asyncio.sleep(max(_POLL_S, len(pending) / 200))
    wall_s = time.perf_counter() - started
    stop_killer.set()
    killed_at = await killer if killer is not None else None
    cpu = sum(cpu_s(pid) - before for pid, before in cpu_before.items() if _alive(pid))
    done = sum(s == "done" for s in states.values())
    stored, requeued = _stored_per_job(running.database_url)
    return {
        "jobs": jobs,
        "apis": len(running.api_urls),
        "workers": len(running.workers),
        "killed_worker_after_done": killed_at,
        "done": done,
        "failed": sum(s == "failed" for s in states.values()),
        "unfinished": len(job_ids) - sum(s in ("done", "failed") for s in states.values()),
        "lost": sum(1 for j in job_ids if stored.get(j, 0) == 0),
        "duplicated": sum(1 for j in job_ids if stored.get(j, 0) > 1),
        "evaluations_stored": sum(stored.values()),
        "jobs_run_again": requeued,
        "status_reads_dropped": reads_dropped,
        "submit_s": round(submitted_s, 2),
        "wall_s": round(wall_s, 2),
        "throughput_per_s": round(done / wall_s, 2) if wall_s else 0.0,
        "service_cpu_ms_per_evaluation": round(cpu * 1000 / done, 1) if done else None,
    }


async def _states(
    http: httpx.AsyncClient, url: str, job_ids: list[str], gate: asyncio.Semaphore
) -> dict[str, str]:
    async def one(job_id: str) -> tuple[str, str]:
        async with gate:
            try:
                reply = await http.get(f"{url}/v1/jobs/{job_id}")
            except httpx.TransportError:
                return job_id, _UNREACHABLE  # read again at the next poll, and counted
        return job_id, str(reply.json()["status"]) if reply.status_code == 200 else "unknown"

    return dict(await asyncio.gather(*(one(j) for j in job_ids)))


def _kill_when_done(running: Cluster, after: int, stop: threading.Event) -> int | None:
    """SIGKILL the first worker once `after` jobs have succeeded, counted straight from the
    database: polling the API is too coarse, as a fast run can finish between two polls and
    the worker would die with nothing in hand. The count it died at, or None if never."""
    with psycopg.connect(running.database_url, autocommit=True) as conn:
        while not stop.is_set():
            row = conn.execute(
                "select count(*) from procrastinate_jobs where status = 'succeeded'"
            ).fetchone()
            done = int(row[0]) if row else 0
            if done >= after:
                running.workers[0].send_signal(signal.SIGKILL)
                return done
            time.sleep(_KILL_POLL_S)
    return None


_KILL_POLL_S = 0.01


def _stored_per_job(database_url: str) -> tuple[dict[str, int], int]:
    """Evaluations stored per job id, and how many jobs ran more than once (a dead worker's,
    queued again), read straight from the database."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "select job_id, count(*) from evaluations where job_id is not null group by job_id"
        ).fetchall()
        again = conn.execute("select count(*) from procrastinate_jobs where attempts > 1")
        requeued = again.fetchone()
    return {str(job_id): int(n) for job_id, n in rows}, int(requeued[0]) if requeued else 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


async def run_scale(*, jobs: int, examples_dir: Path) -> list[dict[str, Any]]:
    """Throughput and service CPU per evaluation with 1 and then 2 workers (two API replicas,
    a fresh database each), on a throwaway PostgreSQL server."""
    from reasoning_service.testing.postgres import TemporaryPostgres

    rows = []
    with TemporaryPostgres() as server:
        for workers in (1, 2):
            url = server.create_database()
            with cluster(url, apis=2, workers=workers, examples_dir=examples_dir) as running:
                rows.append(await run_jobs(running, jobs=jobs, examples_dir=examples_dir))
    return rows


def main() -> None:
    """`python -m reasoning_service.bench.cluster [JOBS]` (`make bench-scale`)."""
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    examples = Path(__file__).resolve().parents[3] / "examples"
    for row in asyncio.run(run_scale(jobs=jobs, examples_dir=examples)):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
