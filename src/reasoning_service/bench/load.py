"""Item 7: more evaluations at once than the service can run, with a liveness prober (issue 13).

Two processes: the service (`uvicorn --factory …create_app`, the conditions controller, offline,
auth off, its own SQLite file) and this client. N callers each send a full evaluation of the
bundled example case (every criterion of its policy) at the same moment; a caller turned away
(503/429) waits its `Retry-After` (plus jitter) and tries again, as a well-behaved client
would. Meanwhile a prober asks `/healthz` and `/readyz` every 100 ms (each waits for its answer
first) over connections of its own.

Reported: how many of the first N were accepted and turned away; latency of every accepted
attempt (201) and of each caller from first try to result; rejections (and whether each said
`Retry-After`) and other failures; throughput of served evaluations; and the probes' latency
during the run, next to an idle baseline from the same run (goal: p99 ≤ 1 s).
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from reasoning_service.bench.live import BenchClient, cpu_s, service_process
from reasoning_service.bench.stats import percentile, summarise_ms
from reasoning_service.service.examples import load_example_cases

__all__ = ["run_load"]

"""The bundled example case, under the examples folder."""
_PROBE_EVERY_S = 0.1
_IDLE_PROBES = 20
_ATTEMPTS = 30
"""Tries per caller, Retry-After honoured between them."""
_REJECTED = (429, 503)


async def run_load(
    *, evaluations: int, examples_dir: Path, service_env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Fire `evaluations` at once at a fresh service process; see the module docstring.

    `service_env` adds settings to the service (`REASONING_MAX_EVALUATIONS` …)."""
    example = load_example_cases(examples_dir)[0]
    case = json.loads((examples_dir / "cases" / example.file).read_text(encoding="utf-8"))
    body = {"case": case, "policy_id": example.policy_id}
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "REASONING_DB_PATH": str(Path(tmp) / "service.db"),
            "REASONING_CONTROLLER": "heuristic",
            "REASONING_EXAMPLES_DIR": str(examples_dir),
            **(service_env or {}),
        }
        with service_process(env) as (url, pid):
            async with BenchClient(url) as client, httpx.AsyncClient(base_url=url) as prober:
                warm = await client.post_json("/v1/evaluations", body)  # imports, first write
                if warm.status != 201:
                    raise RuntimeError(f"the warm-up evaluation failed: HTTP {warm.status}")
                idle = [(await _probe(prober, "/healthz"))[0] for _ in range(_IDLE_PROBES)]
                cpu_before = cpu_s(pid)
                row = await _burst(client, prober, body, evaluations)
                row["service_cpu_s"] = round(cpu_s(pid) - cpu_before, 2)
    row["healthz_idle"] = summarise_ms(idle)
    return {
        "what": f"{evaluations} evaluations of {example.file} against every criterion of "
        f"{example.policy_id} at once (conditions controller), /healthz and /readyz probed every "
        f"{_PROBE_EVERY_S} s",
        "evaluations": evaluations,
        "client": client.kind,
        "service_env": service_env or {},
        **row,
    }


@dataclass(frozen=True)
class _Attempt:
    latency_s: float
    status: int | str
    """The HTTP status, or the transport error's name."""
    retry_after_s: float | None


async def _burst(
    client: BenchClient, prober: httpx.AsyncClient, body: dict[str, Any], evaluations: int
) -> dict[str, Any]:
    done = asyncio.Event()
    probes: dict[str, list[float]] = {"/healthz": [], "/readyz": []}
    probe_failures = 0

    async def probe_until_done(path: str) -> None:
        nonlocal probe_failures
        while not done.is_set():
            latency, ok = await _probe(prober, path)
            probes[path].append(latency)
            probe_failures += not ok
            await asyncio.sleep(_PROBE_EVERY_S)

    probing = [asyncio.create_task(probe_until_done(path)) for path in probes]
    rng = random.Random(13)
    started = time.perf_counter()
    callers = await asyncio.gather(*(_caller(client, body, rng) for _ in range(evaluations)))
    wall_s = time.perf_counter() - started
    done.set()
    await asyncio.gather(*probing)
    attempts = [a for caller, _ in callers for a in caller]
    first = [caller[0] for caller, _ in callers]
    accepted = [a.latency_s for a in attempts if a.status == 201]
    rejected = [a for a in attempts if a.status in _REJECTED]
    served = [total for caller, total in callers if caller[-1].status == 201]
    failed: dict[str, int] = {}
    for a in attempts:
        if a.status != 201 and a.status not in _REJECTED:
            failed[str(a.status)] = failed.get(str(a.status), 0) + 1
    return {
        "wall_s": round(wall_s, 3),
        "first_try_accepted": sum(a.status == 201 for a in first),
        "first_try_rejected": sum(a.status in _REJECTED for a in first),
        "rejected_total": len(rejected),
        "rejected_without_retry_after": sum(a.retry_after_s is None for a in rejected),
        "rejected_p95_s": round(percentile([a.latency_s for a in rejected], 95), 3),
        "failed": failed,
        "served": len(served),
        "throughput_per_s": round(len(served) / wall_s, 2),
        "accepted_p50_s": round(percentile(accepted, 50), 3),
        "accepted_p95_s": round(percentile(accepted, 95), 3),
        "accepted_max_s": round(max(accepted), 3) if accepted else 0.0,
        "served_end_to_end_p50_s": round(percentile(served, 50), 3),
        "served_end_to_end_p95_s": round(percentile(served, 95), 3),
        "healthz": summarise_ms(probes["/healthz"]),
        "readyz": summarise_ms(probes["/readyz"]),
        "probe_failures": probe_failures,
    }


async def _caller(
    client: BenchClient, body: dict[str, Any], rng: random.Random
) -> tuple[list[_Attempt], float]:
    """One caller: POST, and after a 503/429 wait its Retry-After (plus up to half again, so
    the callers do not all come back at once) and try again, up to `_ATTEMPTS` times.
    Returns the attempts and the seconds from the first to the last answer."""
    started = time.perf_counter()
    attempts: list[_Attempt] = []
    while len(attempts) < _ATTEMPTS:
        attempt = await _evaluate(client, body)
        attempts.append(attempt)
        if attempt.status not in _REJECTED or attempt.retry_after_s is None:
            break
        await asyncio.sleep(attempt.retry_after_s * (1 + rng.random() / 2))
    return attempts, time.perf_counter() - started


async def _evaluate(client: BenchClient, body: dict[str, Any]) -> _Attempt:
    started = time.perf_counter()
    try:
        response = await client.post_json("/v1/evaluations", body)
    except Exception as exc:  # a refused or reset connection is a failed evaluation, counted
        return _Attempt(time.perf_counter() - started, type(exc).__name__, None)
    retry_after = float(response.retry_after) if response.retry_after is not None else None
    return _Attempt(time.perf_counter() - started, response.status, retry_after)


async def _probe(prober: httpx.AsyncClient, path: str) -> tuple[float, bool]:
    """(seconds until `path` answered, whether it answered 200)."""
    started = time.perf_counter()
    try:
        response = await prober.get(path, timeout=60)
    except httpx.HTTPError:
        return time.perf_counter() - started, False
    return time.perf_counter() - started, response.status_code == 200
