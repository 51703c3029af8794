"""POST /v1/evaluations over HTTP: verified results, stored, and clear errors for bad input."""

from __future__ import annotations

import copy

import httpx

from reasoning_service.api.app import create_app
from reasoning_service.models import CaseBundle, EvaluationResult, Policy
from reasoning_service.testing.live_server import LiveServer
from reasoning_service.tools.citations import verify_case_evidence, verify_policy_citation


def assert_citations_verify(result: EvaluationResult, policy: Policy, case: CaseBundle) -> None:
    for criterion in result.results:
        for citation in criterion.policy_citations:
            assert verify_policy_citation(policy, citation) is not None, citation
        for evidence in criterion.case_evidence:
            assert verify_case_evidence(case, evidence) is not None, evidence


def evaluate(
    client: httpx.Client, case: dict, policy_id: str = "NCD-240.4", **extra
) -> httpx.Response:
    return client.post("/v1/evaluations", json={"case": case, "policy_id": policy_id, **extra})


def test_evaluation_returns_every_criterion_with_verifiable_citations(client, cpap_case_json):
    response = evaluate(client, cpap_case_json)
    assert response.status_code == 201, response.text
    result = EvaluationResult.model_validate(response.json())
    policy = Policy.model_validate(client.get("/v1/policies/NCD-240.4").json())
    assert [r.criterion_id for r in result.results] == [
        c.criterion_id for c in policy.criteria.criteria
    ]
    assert result.recommendation.value in {"approve", "pend_for_review"}
    assert result.policy.sha256 == policy.sha256 and result.service_version
    assert any(r.policy_citations for r in result.results)
    assert_citations_verify(result, policy, CaseBundle.model_validate(cpap_case_json))


def test_a_returned_evaluation_is_stored_and_survives_a_restart(
    settings, admin_key, cpap_case_json
):
    headers = {"Authorization": f"Bearer {admin_key}"}
    with LiveServer(create_app(settings)) as server:
        created = httpx.post(
            f"{server.url}/v1/evaluations",
            json={"case": cpap_case_json, "policy_id": "NCD-240.4"},
            headers=headers,
            timeout=60,
        ).json()
    with LiveServer(create_app(settings)) as server:
        fetched = httpx.get(
            f"{server.url}/v1/evaluations/{created['evaluation_id']}", headers=headers
        )
    assert fetched.status_code == 200
    assert fetched.json() == created


def test_selected_criteria_only(client, cpap_case_json):
    response = evaluate(client, cpap_case_json, criterion_ids=["NCD-240.4/C5"])
    assert [r["criterion_id"] for r in response.json()["results"]] == ["NCD-240.4/C5"]
    assert response.json()["recommendation"] == "pend_for_review"


def test_unknown_policy_is_404(client, cpap_case_json):
    response = evaluate(client, cpap_case_json, policy_id="NCD-999")
    assert response.status_code == 404
    assert "NCD-999" in response.json()["message"]


def test_unknown_criterion_is_422_naming_the_field_not_the_value(client, cpap_case_json):
    response = evaluate(client, cpap_case_json, criterion_ids=["NCD-240.4/C99"])
    assert response.status_code == 422
    # The field is named by position; the value the caller sent is not echoed.
    assert "criterion_ids[0]" in response.json()["message"] and "C99" not in response.text


def test_malformed_json_is_400(client):
    response = client.post(
        "/v1/evaluations", content=b'{"case": {', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_json"


def test_wrong_type_is_422_naming_the_field_without_echoing_the_value(client, cpap_case_json):
    case = copy.deepcopy(cpap_case_json)
    case["patient"]["age"] = "CANARY-fifty-four"
    response = evaluate(client, case)
    assert response.status_code == 422
    body = response.json()
    assert "case.patient.age" in body["message"]
    assert "CANARY" not in response.text


def test_missing_case_is_422(client):
    response = client.post("/v1/evaluations", json={"policy_id": "NCD-240.4"})
    assert response.status_code == 422 and "case" in response.json()["message"]


def test_empty_case_is_422(client):
    response = evaluate(client, {"case_id": "empty-1"})
    assert response.status_code == 422
    assert "nothing to evaluate" in response.json()["message"]


def test_unknown_top_level_field_is_rejected(client, cpap_case_json):
    response = evaluate(client, cpap_case_json, polcy_version="3")
    assert response.status_code == 422 and "polcy_version" in response.json()["message"]


def test_contradicting_facts_still_get_a_verified_result(client, cpap_case_json):
    case = copy.deepcopy(cpap_case_json)
    ahi = next(f for f in case["facts"] if f["field"] == "sleep_study.ahi")
    case["facts"].append({**ahi, "value": 9, "confidence": 0.6})
    response = evaluate(client, case, criterion_ids=["NCD-240.4/C5"])
    assert response.status_code == 201
    result = EvaluationResult.model_validate(response.json())
    policy = Policy.model_validate(client.get("/v1/policies/NCD-240.4").json())
    assert_citations_verify(result, policy, CaseBundle.model_validate(case))


def test_unknown_evaluation_is_404(client):
    assert client.get("/v1/evaluations/nope").status_code == 404
    assert client.get("/v1/evaluations/nope/trace").status_code == 404


def test_trace_of_a_heuristic_evaluation_lists_each_criterion(client, cpap_case_json):
    created = evaluate(client, cpap_case_json, criterion_ids=["NCD-240.4/C1"]).json()
    trace = client.get(f"/v1/evaluations/{created['evaluation_id']}/trace").json()
    assert [c["criterion_id"] for c in trace["criteria"]] == ["NCD-240.4/C1"]
