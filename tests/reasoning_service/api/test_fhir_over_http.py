"""FHIR over HTTP: a PAS Bundle in, ClaimResponse and QuestionnaireResponse out, the same
statuses as the equivalent case bundle (API and CLI), and malformed bundles never a 5xx."""

from __future__ import annotations

import json

import pytest
from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.claimresponse import ClaimResponse
from fhir.resources.R4B.questionnaireresponse import QuestionnaireResponse
from tests.reasoning_service.fhir.test_inbound import BROKEN, _broken

from reasoning_service.cli import main
from reasoning_service.fhir.outbound import REVIEW_ACTION_EXTENSION
from testdata import EXAMPLES

FHIR = EXAMPLES / "fhir"
MANIFEST = json.loads((FHIR / "manifest.json").read_text())["bundles"]


def statuses(result: dict) -> dict[str, str]:
    return {r["criterion_id"]: r["status"] for r in result["results"]}


@pytest.mark.parametrize("example", MANIFEST, ids=[m["file"] for m in MANIFEST])
def test_a_fhir_bundle_gives_the_statuses_of_its_case_bundle_by_api_and_cli(
    client, example, settings, monkeypatch, capsys
):
    fhir_bundle = json.loads((FHIR / example["file"]).read_text())
    case = json.loads((FHIR / example["case"]).read_text())
    policy_id = example["policy_id"]
    by_fhir = client.post(
        "/v1/evaluations", json={"fhir_bundle": fhir_bundle, "policy_id": policy_id}
    )
    by_case = client.post("/v1/evaluations", json={"case": case, "policy_id": policy_id})
    assert by_fhir.status_code == 201, by_fhir.text
    assert statuses(by_fhir.json()) == statuses(by_case.json())
    monkeypatch.setenv("REASONING_DB_PATH", str(settings.db_path))
    code = main(["evaluate", str(FHIR / example["file"]), "--policy", policy_id, "--json"])
    assert code == 0
    assert statuses(json.loads(capsys.readouterr().out)) == statuses(by_case.json())


def test_format_fhir_returns_a_claim_response_and_a_questionnaire_response(client):
    fhir_bundle = json.loads((FHIR / "cpap-example-001.bundle.json").read_text())
    created = client.post(
        "/v1/evaluations", json={"fhir_bundle": fhir_bundle, "policy_id": "NCD-240.4"}
    ).json()
    response = client.get(f"/v1/evaluations/{created['evaluation_id']}", params={"format": "fhir"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/fhir+json")
    bundle = Bundle.model_validate(response.json())  # round trip through the R4B models
    claim, questionnaire = (entry.resource for entry in bundle.entry)
    assert isinstance(claim, ClaimResponse) and isinstance(questionnaire, QuestionnaireResponse)
    assert created["recommendation"] == "pend_for_review"
    assert claim.outcome == "queued"
    review = claim.item[0].adjudication[0].extension[0]
    assert review.url == REVIEW_ACTION_EXTENSION
    assert review.extension[0].valueCodeableConcept.coding[0].code == "A4"  # pended, never A3
    assert len(claim.processNote) == len(created["open_criteria"])
    for note, open_ in zip(claim.processNote, created["open_criteria"], strict=True):
        assert note.text.startswith(open_["criterion_id"])
    assert [i.linkId for i in questionnaire.item] == [r["criterion_id"] for r in created["results"]]
    for item, result in zip(questionnaire.item, created["results"], strict=True):
        assert item.answer[0].valueCoding.code == result["status"]
        assert [a.linkId.split("/")[-1] for a in item.item or []] == [
            a["atom_id"] for a in result["atoms"]
        ]
    evidence = [
        ext
        for item in questionnaire.item
        for sub in item.item or []
        for ext in sub.answer[0].extension or []
    ]
    assert any(
        e.valueReference and "DocumentReference/" in e.valueReference.reference for e in evidence
    )
    again = ClaimResponse.model_validate(claim.model_dump(mode="json", exclude_none=True))
    assert again == claim


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_malformed_bundle_over_http_is_a_422_naming_the_element(client, name):
    change, says = BROKEN[name]
    response = client.post(
        "/v1/evaluations", json={"fhir_bundle": _broken(change), "policy_id": "NCD-240.4"}
    )
    assert response.status_code == 422, response.text
    assert says in response.json()["message"]


def test_a_case_request_body_error_still_names_the_case_field(client, cpap_case_json):
    cpap_case_json["patient"]["age"] = -3
    response = client.post("/v1/evaluations", json={"case": cpap_case_json, "policy_id": "X"})
    assert response.status_code == 422 and "case.patient.age" in response.json()["message"]
    not_object = client.post(
        "/v1/evaluations", json={"fhir_bundle": [1, 2], "policy_id": "NCD-240.4"}
    )
    assert not_object.status_code == 422 and "fhir_bundle" in not_object.json()["message"]
