"""Asynchronous evaluations: 202 and a job to poll, idempotent submissions, one result per job,
and a clear 422 where the store is SQLite."""

from __future__ import annotations

import asyncio

import httpx
from tests.reasoning_service.api.conftest import bearer, make_settings, new_key

from reasoning_service.api.app import create_app
from reasoning_service.service.container import build_services
from reasoning_service.service.jobs import run_job
from reasoning_service.testing.live_server import LiveServer

ONE_CRITERION = {"policy_id": "NCD-240.4", "criterion_ids": ["NCD-240.4/C1"]}


def test_async_mode_on_sqlite_is_422_saying_it_needs_postgresql(client, cpap_case_json):
    body = {"case": cpap_case_json, **ONE_CRITERION, "mode": "async"}
    reply = client.post("/v1/evaluations", json=body)
    assert reply.status_code == 422
    assert "PostgreSQL" in reply.json()["message"]
    prefer = client.post(
        "/v1/evaluations", json={**body, "mode": "sync"}, headers={"Prefer": "respond-async"}
    )
    assert prefer.status_code == 422
    assert client.post("/v1/evaluations", json={**body, "mode": "sync"}).status_code == 201


def test_an_async_submission_is_queued_and_a_retry_returns_the_first_job(
    postgres_url, tmp_path, cpap_case_json
):
    settings = make_settings(tmp_path / "unused.db", database_url=postgres_url)
    alice, bob = new_key(postgres_url), new_key(postgres_url)
    body = {"case": cpap_case_json, **ONE_CRITERION}
    with LiveServer(create_app(settings)) as live:
        post = live.url + "/v1/evaluations"
        retry = {**bearer(alice), "Idempotency-Key": "order-7"}
        first = httpx.post(post, json={**body, "mode": "async"}, headers=retry)
        again = httpx.post(post, json={**body, "mode": "async"}, headers=retry)
        other_body = httpx.post(
            post, json={**body, "mode": "async", "criterion_ids": ["NCD-240.4/C2"]}, headers=retry
        )
        preferred = httpx.post(
            post, json=body, headers={**bearer(alice), "Prefer": "respond-async, wait=5"}
        )
        job = first.json()
        status = httpx.get(job["status_url"], headers=bearer(alice))
        foreign = httpx.get(job["status_url"], headers=bearer(bob))
        unknown = httpx.get(live.url + "/v1/jobs/nope", headers=bearer(alice))
        synchronous = httpx.post(post, json=body, headers=bearer(alice))
    assert first.status_code == 202 and first.headers["location"] == job["status_url"]
    assert job["status"] == "queued" and job["evaluation_id"] is None
    assert again.status_code == 202 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["job_id"] == job["job_id"]
    assert other_body.status_code == 422
    assert preferred.status_code == 202 and preferred.json()["job_id"] != job["job_id"]
    assert status.status_code == 200 and status.json()["status"] == "queued"
    assert foreign.status_code == 403 and unknown.status_code == 404
    assert synchronous.status_code == 201  # the synchronous form is unchanged


async def test_a_job_run_twice_at_once_stores_one_evaluation(postgres_url, tmp_path, cpap_case):
    from reasoning_service.models import EvaluationRequest

    settings = make_settings(tmp_path / "unused.db", database_url=postgres_url)
    services = await build_services(settings)
    try:
        assert services.jobs is not None
        request = EvaluationRequest(case=cpap_case, **ONE_CRITERION, mode="async")
        job = await services.jobs.submit(request, owner="k1")
        runs = [run_job(services.store, services.evaluations, job.job_id) for _ in range(3)]
        evaluation_ids = await asyncio.gather(*runs)
        assert len(set(evaluation_ids)) == 1
        again = await run_job(services.store, services.evaluations, job.job_id)
        assert again == evaluation_ids[0]
        count = await services.store.run(
            lambda tables: tables.count("evaluations", "job_id = ?", [job.job_id])
        )
        assert count == 1
        done = await services.jobs.status(job.job_id)
        assert done.state == "done" and done.evaluation_id == evaluation_ids[0]
    finally:
        await services.aclose()
