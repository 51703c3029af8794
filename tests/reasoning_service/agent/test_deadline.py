"""The per-evaluation deadline over HTTP: a provider that answers slowly never turns into a 500
or a hung request; criteria still open at the deadline come back `uncertain` (`deadline`)."""

from __future__ import annotations

import time

import httpx

from reasoning_service.api.app import create_app
from reasoning_service.models import CriterionStatus, EvaluationResult, ReasonCode
from reasoning_service.settings import Settings
from reasoning_service.testing.live_server import LiveServer
from reasoning_service.testing.scripted_llm import tool_call
from reasoning_service.testing.scripted_server import ScriptedServer


def test_a_slow_provider_meets_the_deadline_not_a_500(tmp_path, cpap_case_json):
    slow_facts = tool_call("facts_get", {"field": "sleep_study.ahi"})
    with ScriptedServer(responder=lambda body: slow_facts, latency_s=0.4) as llm_server:
        settings = Settings(
            db_path=tmp_path / "db.sqlite",
            controller="react",
            llm_provider="openai",
            llm_model="slow",
            llm_base_url=llm_server.base_url,
            llm_api_key="sk-test-not-a-real-key",
            llm_timeout_s=30,
            atom_questions=False,  # the loop is what the deadline cuts short
            tree_search="lexical",
            criterion_concurrency=2,  # criteria queue: the deadline counts the wait too
            evaluation_deadline_s=1.5,
            auth="off",
        )
        with LiveServer(create_app(settings)) as service:
            started = time.monotonic()
            response = httpx.post(
                f"{service.url}/v1/evaluations",
                json={"case": cpap_case_json, "policy_id": "NCD-240.4"},
                timeout=60,
            )
            elapsed_s = time.monotonic() - started
    assert response.status_code == 201, response.text
    result = EvaluationResult.model_validate(response.json())
    assert len(result.results) == 9
    assert all(r.status is CriterionStatus.UNCERTAIN for r in result.results)
    assert all(r.reason_code is ReasonCode.DEADLINE for r in result.results)
    assert result.recommendation.value == "pend_for_review"
    assert elapsed_s < 6
