"""The deployment's topology as processes: two API replicas and two workers on one throwaway
PostgreSQL. A worker is SIGKILLed mid-run; every job still ends with exactly one stored result.

The default run submits 120 jobs (2 busy cores); `make bench-scale` (or
`REASONING_KILL_TEST_JOBS=1000`) runs the issue's 1000.
"""

from __future__ import annotations

import os

from reasoning_service.bench.cluster import cluster, run_jobs
from testdata import EXAMPLES

JOBS = int(os.environ.get("REASONING_KILL_TEST_JOBS", "120"))


async def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(postgres_url):
    with cluster(postgres_url, apis=2, workers=2, examples_dir=EXAMPLES) as running:
        report = await run_jobs(
            running, jobs=JOBS, examples_dir=EXAMPLES, kill_worker_after=JOBS // 4
        )
    print(report)
    assert report["killed_worker_after_done"] is not None, report
    assert report["jobs_run_again"] >= 1, report  # it was killed with jobs in hand
    assert report["done"] == JOBS, report
    assert report["failed"] == report["unfinished"] == 0, report
    assert report["lost"] == 0 and report["duplicated"] == 0, report
    assert report["evaluations_stored"] == JOBS, report
