"""REASONING_CONTROLLER=react end to end: the service's real OpenAI/Anthropic adapters talk to a
scripted provider on 127.0.0.1, and the result, its citations and its trace come back over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from reasoning_service.api.app import create_app
from reasoning_service.models import CaseBundle, EvaluationResult, Policy, ReasonCode
from reasoning_service.settings import Settings
from reasoning_service.testing.live_server import LiveServer, free_port
from reasoning_service.testing.scripted_llm import finish, tool_call
from reasoning_service.testing.scripted_server import ScriptedServer, http_error

AHI_POLICY_QUOTE = "AHI or RDI greater than or equal to 15 events per hour, or"


def react_settings(db_path: Path, provider: str, base_url: str) -> Settings:
    return Settings(
        db_path=db_path,
        controller="react",
        llm_provider=provider,
        llm_model="test-model",
        llm_base_url=base_url,
        llm_api_key="sk-test-not-a-real-key",
        llm_timeout_s=2,
        tree_search="lexical",
        retry_base_s=0.01,
        auth="off",
        atom_questions=False,  # these tests drive the ReAct loop itself
    )


def script(node_id: str) -> list:
    return [
        tool_call("facts_get", {"field": "sleep_study.ahi"}),
        finish(
            status="met",
            confidence=0.92,
            rationale="AHI 18 events/hour is at least 15.",
            policy_citations=[{"node_id": node_id, "quote": AHI_POLICY_QUOTE}],
            case_evidence=[{"doc_id": "psg-1", "page": 2, "quote": "AHI: 18 events/hour"}],
        ),
    ]


def ahi_node(http: httpx.Client) -> tuple[Policy, str]:
    from retrieval import walk

    policy = Policy.model_validate(http.get("/v1/policies/NCD-240.4").json())
    return policy, next(n.node_id for n in walk(policy.tree) if AHI_POLICY_QUOTE in n.text)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_react_evaluation_returns_verified_results_and_a_trace(provider, tmp_path, cpap_case_json):
    with ScriptedServer() as llm_server:
        base_url = llm_server.base_url if provider == "openai" else llm_server.anthropic_base_url
        settings = react_settings(tmp_path / "db.sqlite", provider, base_url)
        with (
            LiveServer(create_app(settings)) as service,
            httpx.Client(base_url=service.url, timeout=60) as http,
        ):
            policy, node_id = ahi_node(http)
            llm_server.push(*script(node_id))
            response = http.post(
                "/v1/evaluations",
                json={
                    "case": cpap_case_json,
                    "policy_id": "NCD-240.4",
                    "criterion_ids": ["NCD-240.4/C5"],
                },
            )
            assert response.status_code == 201, response.text
            result = EvaluationResult.model_validate(response.json())
            trace = http.get(f"/v1/evaluations/{result.evaluation_id}/trace").json()
        llm_server.assert_complete()

    criterion = result.results[0]
    assert result.controller == "react" and criterion.controller == "react"
    assert criterion.status.value == "met" and criterion.reason_code is None
    assert criterion.provider == provider and criterion.prompt_id == "react-v1"
    assert criterion.policy_citations[0].char_start is not None
    assert criterion.case_evidence[0].doc_id == "psg-1"
    assert criterion.usage.llm_calls == 2 and criterion.usage.input_tokens > 0
    # The trace holds the whole conversation and one interaction per LLM call.
    recorded = trace["criteria"][0]
    assert [m["role"] for m in recorded["messages"]][:3] == ["system", "user", "assistant"]
    assert len(recorded["interactions"]) == 2 and all(
        i["success"] for i in recorded["interactions"]
    )
    # On the wire: the tool result answered the call it belongs to.
    second = llm_server.requests[1].messages
    if provider == "openai":
        assert second[-1]["role"] == "tool"
        assert second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
        assert second[-2]["content"] == ""
    else:
        block = second[-1]["content"][0]
        assert block["type"] == "tool_result"
        assert block["tool_use_id"] == second[-2]["content"][-1]["id"]
    del policy


def test_with_the_llm_down_every_criterion_falls_back_and_nothing_is_5xx(tmp_path, cpap_case_json):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    settings = react_settings(tmp_path / "db.sqlite", "openai", dead)
    with LiveServer(create_app(settings)) as service:
        response = httpx.post(
            f"{service.url}/v1/evaluations",
            json={"case": cpap_case_json, "policy_id": "NCD-240.4"},
            timeout=120,
        )
    assert response.status_code == 201, response.text
    result = EvaluationResult.model_validate(response.json())
    assert len(result.results) == 9
    assert all(r.reason_code is ReasonCode.LLM_FALLBACK for r in result.results)
    assert all(r.controller == "heuristic" for r in result.results)
    assert CaseBundle.model_validate(cpap_case_json).case_id == result.case_id


def test_a_permanent_error_is_not_retried_and_falls_back(tmp_path, cpap_case_json):
    with ScriptedServer([http_error(401, "invalid api key")]) as llm_server:
        settings = react_settings(tmp_path / "db.sqlite", "openai", llm_server.base_url)
        with LiveServer(create_app(settings)) as service:
            response = httpx.post(
                f"{service.url}/v1/evaluations",
                json={
                    "case": cpap_case_json,
                    "policy_id": "NCD-240.4",
                    "criterion_ids": ["NCD-240.4/C1"],
                },
                timeout=60,
            )
        assert len(llm_server.requests) == 1
    result = response.json()["results"][0]
    assert response.status_code == 201 and result["reason_code"] == "llm_fallback"


def test_text_react_mode_runs_the_same_loop_without_native_tools(tmp_path, cpap_case_json):
    from reasoning_service.testing.scripted_llm import text

    with ScriptedServer() as llm_server:
        settings = react_settings(tmp_path / "db.sqlite", "openai", llm_server.base_url)
        settings = settings.model_copy(update={"tool_calling_mode": "text"})
        with (
            LiveServer(create_app(settings)) as service,
            httpx.Client(base_url=service.url, timeout=60) as http,
        ):
            _, node_id = ahi_node(http)
            answer = {
                "status": "met",
                "confidence": 0.9,
                "rationale": "AHI 18 is at least 15.",
                "policy_citations": [{"node_id": node_id, "quote": AHI_POLICY_QUOTE}],
                "case_evidence": [{"doc_id": "psg-1", "page": 2, "quote": "AHI: 18 events/hour"}],
            }
            llm_server.push(
                text(
                    "Thought: I need the AHI.\nAction: facts_get\n"
                    'Action Input: {"field": "sleep_study.ahi"}'
                ),
                text(f"Thought: 18 >= 15.\nFinal Answer: {json.dumps(answer)}"),
            )
            response = http.post(
                "/v1/evaluations",
                json={
                    "case": cpap_case_json,
                    "policy_id": "NCD-240.4",
                    "criterion_ids": ["NCD-240.4/C5"],
                },
            )
        wire = llm_server.requests
    result = response.json()["results"][0]
    assert response.status_code == 201 and result["status"] == "met", result
    assert result["reason_code"] is None
    assert all("tools" not in r.body for r in wire)
    assert "Observation:" in wire[1].messages[-1]["content"]
