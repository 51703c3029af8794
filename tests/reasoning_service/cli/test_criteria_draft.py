"""`reasoning-service criteria draft` end to end against the scripted OpenAI-wire server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reasoning_service.cli import main
from reasoning_service.models import CriteriaSet
from reasoning_service.testing.scripted_llm import text
from reasoning_service.testing.scripted_server import ScriptedServer

POLICY = """# Test policy

## Indications

The patient has an AHI of at least 15 events per hour.

The patient has no history of stroke.

The patient was evaluated face to face.
"""
CRITERIA = {
    "policy_id": "T-2",
    "version": "1",
    "criteria": [
        {
            "criterion_id": "T-2/C1",
            "text": "AHI ≥ 15",
            "section": "Indications",
            "quote": "The patient has an AHI of at least 15 events per hour.",
        },
        {
            "criterion_id": "T-2/C2",
            "text": "No stroke",
            "section": "Indications",
            "quote": "The patient has no history of stroke.",
        },
        {
            "criterion_id": "T-2/C3",
            "text": "Face to face evaluation",
            "section": "Indications",
            "quote": "The patient was evaluated face to face.",
        },
    ],
    "logic": {"all_of": ["T-2/C1", "T-2/C2", "T-2/C3"]},
}
AHI = {
    "kind": "quantity",
    "id": "ahi",
    "label": "AHI ≥ 15 events/hour",
    "concept": "AHI",
    "aliases": ["apnea-hypopnea index"],
    "comparator": ">=",
    "value": 15,
    "unit": "event/hour",
}
STROKE = {
    "kind": "finding",
    "id": "stroke",
    "label": "No history of stroke",
    "concept": "stroke",
    "aliases": ["CVA"],
    "expect": "absent",
}


def reply(conditions: object) -> object:
    return text(f"```json\n{json.dumps({'conditions': conditions})}\n```")


@pytest.fixture
def inputs(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    policy, criteria = tmp_path / "policy.md", tmp_path / "criteria.json"
    policy.write_text(POLICY)
    criteria.write_text(json.dumps(CRITERIA, ensure_ascii=False))
    return policy, criteria


def configure(monkeypatch, base_url: str) -> None:
    for name, value in {
        "LLM_PROVIDER": "openai",
        "LLM_MODEL": "test-model",
        "LLM_BASE_URL": base_url,
        "LLM_API_KEY": "sk-test-not-a-real-key",
        "LLM_TIMEOUT_S": "5",
        "RETRY_BASE_S": "0.01",
    }.items():
        monkeypatch.setenv(f"REASONING_{name}", value)


def test_draft_validates_retries_once_and_leaves_the_unfixable_without_conditions(
    inputs, tmp_path, monkeypatch, capsys
):
    policy, criteria = inputs
    before = criteria.read_text()
    out = tmp_path / "draft.json"
    with ScriptedServer() as llm_server:
        configure(monkeypatch, llm_server.base_url)
        llm_server.push(
            reply({"require": AHI}),
            reply({"require": {**STROKE, "expect": "gone"}}),  # invalid, fixed on retry
            reply({"require": STROKE}),
            text("I think the patient must be seen in person."),  # no JSON
            reply({"require": {"all_of": []}}),  # still invalid
        )
        code = main(
            [
                "criteria",
                "draft",
                str(policy),
                "--criteria",
                str(criteria),
                "--out",
                str(out),
                "--policy-id",
                "T-2-draft",
            ]
        )
        llm_server.assert_complete()
        requests = llm_server.requests

    assert code == 0 and criteria.read_text() == before
    assert len(requests) == 5  # one per criterion, plus one retry each for C2 and C3
    first = json.loads(requests[0].messages[-1]["content"])
    assert first["quote"] == CRITERIA["criteria"][0]["quote"] and first["section"] == "Indications"
    assert "AHI of at least 15" in first["policy_text"]
    assert "conditions" in requests[0].messages[0]["content"]
    retry = requests[2].messages
    assert [m["role"] for m in retry] == ["system", "user", "assistant", "user"]
    assert "expect" in retry[-1]["content"] and "present" in retry[-1]["content"]

    drafted = json.loads(out.read_text())
    assert drafted["policy_id"] == "T-2-draft"
    parsed = CriteriaSet.model_validate(drafted)
    by_id = {c.criterion_id: c for c in parsed.criteria}
    assert by_id["T-2/C1"].conditions.atoms()[0].id == "ahi"
    assert by_id["T-2/C2"].conditions.atoms()[0].expect == "absent"
    assert by_id["T-2/C3"].conditions is None
    errors = capsys.readouterr().err
    assert "T-2/C3: no valid conditions" in errors and "2 of 3 criteria" in errors


def test_draft_refuses_to_overwrite_its_input(inputs, monkeypatch, capsys):
    policy, criteria = inputs
    before = criteria.read_text()
    configure(monkeypatch, "http://127.0.0.1:9/v1")
    code = main(
        ["criteria", "draft", str(policy), "--criteria", str(criteria), "--out", str(criteria)]
    )
    assert code == 2 and criteria.read_text() == before
    assert "overwrite" in capsys.readouterr().err
