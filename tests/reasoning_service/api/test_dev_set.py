"""The shared dev data end to end over HTTP: all five policies with their criteria upload, every
dev case evaluates against its policy without an error, every citation verifies, and the statuses
match the gold labels well enough.

Quality floor (the default controller, over every labeled criterion of shared/data/eval/dev.jsonl):
    - no unsafe `met`: never `met` where the gold status is `not_met` or `missing_info`;
    - status accuracy at least `ACCURACY_FLOOR` (0.85).
A change that drops below either floor fails here, with the disagreements listed.

Skipped when the workspace's `shared/data` folder is not beside the repository."""

from __future__ import annotations

import json

import pytest

from reasoning_service.models import CaseBundle, EvaluationResult, Policy
from reasoning_service.tools.citations import verify_case_evidence, verify_policy_citation
from testdata import SHARED_DATA

DATA = SHARED_DATA
ACCURACY_FLOOR = 0.85
UNSAFE_FOR_MET = {"not_met", "missing_info"}
pytestmark = pytest.mark.skipif(not DATA.exists(), reason="shared/data is not beside the repo")


def upload_all_policies(client) -> None:
    manifest = json.loads((DATA / "policies" / "manifest.json").read_text())
    for entry in manifest["policies"]:
        response = client.post(
            "/v1/policies",
            json={
                "policy_id": entry["policy_id"],
                "version": entry["version"],
                "title": entry["title"],
                "source_format": "markdown",
                "content": (DATA / "policies" / entry["file"]).read_text(),
                "source_url": entry["source_url"],
                "license": entry["license"],
                "criteria": json.loads(
                    (DATA / "criteria" / f"{entry['policy_id']}.json").read_text()
                ),
            },
        )
        # 200: the same version is already stored (seeded from examples/), unchanged.
        assert response.status_code in (200, 201), response.text
        assert response.json()["sha256"] == entry["sha256"]


def test_every_dev_example_evaluates_with_verifiable_citations(client):
    upload_all_policies(client)
    examples = [json.loads(line) for line in (DATA / "eval" / "dev.jsonl").read_text().splitlines()]
    cases = {e["case"]: e["policy_id"] for e in examples}
    policies = {
        pid: Policy.model_validate(client.get(f"/v1/policies/{pid}").json())
        for pid in set(cases.values())
    }
    statuses: dict[str, str] = {}
    for case_path, policy_id in sorted(cases.items()):
        case_json = json.loads((DATA / "eval" / case_path).resolve().read_text())
        case = CaseBundle.model_validate(case_json)
        response = client.post("/v1/evaluations", json={"case": case_json, "policy_id": policy_id})
        # 200: the same version is already stored (seeded from examples/), unchanged.
        assert response.status_code in (200, 201), response.text
        result = EvaluationResult.model_validate(response.json())
        for criterion in result.results:
            statuses[f"{case.case_id}/{criterion.criterion_id}"] = criterion.status.value
            for citation in criterion.policy_citations:
                assert verify_policy_citation(policies[policy_id], citation), citation
            for evidence in criterion.case_evidence:
                assert verify_case_evidence(case, evidence), evidence
    assert {e["example_id"] for e in examples} <= set(statuses)

    disagreements = [
        f"{e['example_id']}: gold {e['gold_status']}, got {statuses[e['example_id']]}"
        for e in examples
        if statuses[e["example_id"]] != e["gold_status"]
    ]
    unsafe = [
        e["example_id"]
        for e in examples
        if statuses[e["example_id"]] == "met" and e["gold_status"] in UNSAFE_FOR_MET
    ]
    accuracy = 1 - len(disagreements) / len(examples)
    assert not unsafe, f"unsafe met on {unsafe}"
    assert accuracy >= ACCURACY_FLOOR, f"accuracy {accuracy:.3f} < {ACCURACY_FLOOR}:\n" + "\n".join(
        disagreements
    )
