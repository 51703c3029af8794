"""Item 9 runs the compose topology for real: API replicas and workers on a throwaway PostgreSQL,
every evaluation of every row stored (no timing assertions)."""

from __future__ import annotations

from reasoning_service.bench.data import load_bench_data
from reasoning_service.bench.scale_out import run_scale_out
from testdata import EXAMPLES


async def test_each_row_stores_every_evaluation_in_flight(postgres):
    # `postgres` only for its skip-or-fail rule: item 9 starts a server of its own
    section = await run_scale_out(load_bench_data(EXAMPLES), in_flight=6, delay_s=0.05)
    rows = section["rows"]
    assert [(r["api_processes"], r["workers"], r["mode"]) for r in rows] == [
        (1, 0, "sync"),
        (2, 0, "sync"),
        (2, 1, "async"),
        (2, 2, "async"),
    ]
    for row in rows:
        assert row["ok"] == 6 and row["failed"] == 0, row
        assert row["llm_calls_max"] >= 1 and row["fraction_of_ideal"] is not None
        assert 0 <= row["machine_cpu_busy"] <= 1
