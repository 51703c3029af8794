"""Atom questions end to end: the real OpenAI adapter talks to a scripted provider on 127.0.0.1;
only the atoms code could not settle reach the model, and its answers are checked by code."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from reasoning_service.api.app import create_app
from reasoning_service.models import AtomState, CriterionStatus, EvaluationResult, ReasonCode
from reasoning_service.settings import Settings
from reasoning_service.testing.live_server import LiveServer
from reasoning_service.testing.scripted_llm import tool_call
from reasoning_service.testing.scripted_server import ScriptedServer, http_error

CRITERIA = ["NCD-240.4/C4", "NCD-240.4/C5"]
"""C4: two findings (ordered by the treating physician, supervised) and the order's date before
the test's, which code decides when nothing dates them; C5: AHI ≥ 15, a quantity."""


def atom_settings(db_path: Path, base_url: str) -> Settings:
    return Settings(
        db_path=db_path,
        controller="react",
        llm_provider="openai",
        llm_model="test-model",
        llm_base_url=base_url,
        llm_api_key="sk-test-not-a-real-key",
        llm_timeout_s=2,
        tree_search="lexical",
        retry_base_s=0.01,
        auth="off",
    )


def answer(said: str, evidence: list[str]) -> object:
    return tool_call("answer", {"answer": said, "evidence": evidence, "confidence": 0.9})


def evaluate(llm_server: ScriptedServer, db: Path, case: dict) -> tuple[EvaluationResult, dict]:
    with (
        LiveServer(create_app(atom_settings(db, llm_server.base_url))) as service,
        httpx.Client(base_url=service.url, timeout=60) as http,
    ):
        response = http.post(
            "/v1/evaluations",
            json={"case": case, "policy_id": "NCD-240.4", "criterion_ids": CRITERIA},
        )
        assert response.status_code == 201, response.text
        result = EvaluationResult.model_validate(response.json())
        trace = http.get(f"/v1/evaluations/{result.evaluation_id}/trace").json()
    return result, trace


def test_only_undecided_atoms_are_asked_and_answers_are_verified(tmp_path, cpap_case_json):
    with ScriptedServer() as llm_server:
        llm_server.push(answer("yes", ["S2", "F1"]), answer("yes", ["S1"]))
        result, trace = evaluate(llm_server, tmp_path / "db.sqlite", cpap_case_json)
        llm_server.assert_complete()
        requests = llm_server.requests

    assert len(requests) == 2  # C4's two findings; C5's AHI 18 ≥ 15 is decided by code
    for request in requests:
        assert request.body["tool_choice"] == {"type": "function", "function": {"name": "answer"}}
        question = json.loads(request.messages[-1]["content"])
        assert 1 <= len(question["snippets"]) <= 6
        assert all(len(s["text"]) <= 300 for s in question["snippets"])
    assert requests[0].messages[0] == requests[1].messages[0]  # a stable, cacheable prefix
    by_id = {r.criterion_id: r for r in result.results}
    c4, c5 = by_id["NCD-240.4/C4"], by_id["NCD-240.4/C5"]
    assert c4.status is CriterionStatus.MET and c5.status is CriterionStatus.MET
    assert {a.atom_id: a.decided_by for a in c4.atoms} == {
        "ordered_by_treating_physician": "model",
        "order_before_test": "code",  # no dates to check: the order taken as kept
        "physician_supervision": "model",
    }
    assert c5.atoms and all(a.decided_by == "code" for a in c5.atoms)  # AHI: code decides
    assert all(e.char_start is not None for a in c4.atoms for e in a.evidence if e.doc_id)
    assert c4.prompt_id == "atoms-v1" and c4.provider == "openai" and c4.model == "test-model"
    assert c4.usage.llm_calls == 2 and c4.usage.input_tokens > 0 and c5.usage.llm_calls == 0
    recorded = {c["criterion_id"]: c for c in trace["criteria"]}
    interactions = recorded["NCD-240.4/C4"]["interactions"]
    assert len(interactions) == 2 and all(i["success"] for i in interactions)
    assert not recorded["NCD-240.4/C5"]["interactions"]


def test_a_yes_citing_only_a_family_mention_is_no_answer(tmp_path, cpap_case_json):
    case = json.loads(json.dumps(cpap_case_json))
    for document in case["documents"]:
        document["pages"] = [
            page.replace("Interpreting physician: Maria Chen, MD, Diplomate ABSM", "")
            for page in document["pages"]
        ]
    case["documents"][0]["pages"][0] += "\nHer father had a sleep test under physician supervision."
    with ScriptedServer() as llm_server:
        llm_server.push(answer("yes", ["S2"]), answer("yes", ["S1"]))
        result, _ = evaluate(llm_server, tmp_path / "db.sqlite", case)
    c4 = next(r for r in result.results if r.criterion_id == "NCD-240.4/C4")
    supervision = next(a for a in c4.atoms if a.atom_id == "physician_supervision")
    # the father's test is no evidence of hers: code's reading (nothing about her) stands
    assert supervision.state is not AtomState.HOLDS and supervision.decided_by == "code"
    assert c4.status is not CriterionStatus.MET


def test_a_permanent_llm_error_falls_back_to_code(tmp_path, cpap_case_json):
    with ScriptedServer() as llm_server:
        llm_server.push(http_error(401, "Incorrect API key provided"))
        result, _ = evaluate(llm_server, tmp_path / "db.sqlite", cpap_case_json)
        assert len(llm_server.requests) == 1  # permanent: not retried
    c4 = next(r for r in result.results if r.criterion_id == "NCD-240.4/C4")
    assert c4.reason_code is ReasonCode.LLM_FALLBACK and c4.status is CriterionStatus.MET
    assert all(a.decided_by == "code" for a in c4.atoms)
