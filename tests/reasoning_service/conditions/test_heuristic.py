"""Specifications of the deterministic controller, on small copies of dev cases."""

from __future__ import annotations

import json

import pytest

from reasoning_service.conditions.heuristic import HeuristicController
from reasoning_service.models import (
    CaseBundle,
    CriterionResult,
    CriterionStatus,
    ReasonCode,
)
from reasoning_service.models.task import CriterionTask
from reasoning_service.tools.citations import verify_case_evidence, verify_policy_citation
from testdata import load_case_json, load_policy

CASES = ["cpap-dev-001", "cpap-dev-003", "bar-dev-002", "bar-dev-006"]

_policy = load_policy
_case_json = load_case_json


def _policy_of(case_id: str) -> str:
    return "NCD-240.4" if case_id.startswith("cpap") else "NCD-100.1"


async def _evaluate(case: CaseBundle | dict, criterion_id: str) -> CriterionResult:
    bundle = case if isinstance(case, CaseBundle) else CaseBundle.model_validate(case)
    policy = _policy(criterion_id.split("/")[0])
    assert policy.criteria is not None
    criterion = policy.criteria.criterion(criterion_id)
    assert criterion is not None
    task = CriterionTask(case=bundle, policy=policy, criterion=criterion)
    return await HeuristicController().evaluate(task)


def _with_replaced(case: dict, old: str, new: str) -> dict:
    """The case with `old` replaced by `new` in every page and fact (kept self-consistent)."""
    return json.loads(json.dumps(case).replace(old, new))


async def test_threshold_met_cites_the_value() -> None:
    result = await _evaluate(_case_json("cpap-dev-001"), "NCD-240.4/C5")
    assert result.status is CriterionStatus.MET
    assert any("18" in e.quote for e in result.case_evidence)
    assert (
        result.policy_citations
        and "greater than or equal to 15" in result.policy_citations[0].quote
    )


async def test_value_outside_a_range_is_not_met() -> None:
    result = await _evaluate(_case_json("cpap-dev-001"), "NCD-240.4/C6")
    assert result.status is CriterionStatus.NOT_MET
    assert "18" in result.rationale


@pytest.mark.parametrize(("value", "expected"), [("15.0", "met"), ("14.9", "not_met")])
async def test_threshold_is_exact(value: str, expected: str) -> None:
    case = _with_replaced(
        _case_json("cpap-dev-001"), "AHI: 18 events/hour", f"AHI: {value} events/hour"
    )
    case = _with_replaced(case, "(AHI 18 events/hour)", f"(AHI {value} events/hour)")
    case = _with_replaced(case, '"value": 18,', f'"value": {value},')
    result = await _evaluate(case, "NCD-240.4/C5")
    assert result.status.value == expected


async def test_bmi_is_computed_from_pounds_and_inches() -> None:
    """216 lb at 66 in is 34.86 kg/m²: below 35, whatever the extracted vitals.bmi says."""
    result = await _evaluate(_case_json("bar-dev-002"), "NCD-100.1/C1")
    assert result.status is CriterionStatus.NOT_MET
    assert "34.86" in result.rationale


async def test_negated_and_family_history_do_not_count() -> None:
    """Sleepiness denied, hypertension ruled out, the stroke is the father's."""
    result = await _evaluate(_case_json("cpap-dev-003"), "NCD-240.4/C6")
    assert result.status is CriterionStatus.NOT_MET


async def test_denied_comorbidities_overrule_a_low_confidence_fact() -> None:
    result = await _evaluate(_case_json("bar-dev-006"), "NCD-100.1/C2")
    assert result.status is CriterionStatus.NOT_MET


async def test_silent_record_is_missing_info() -> None:
    case = _case_json("cpap-dev-001")
    case["documents"] = [d for d in case["documents"] if d["doc_id"] != "dme-1"]
    case["facts"] = [f for f in case["facts"] if f["source"]["doc_id"] != "dme-1"]
    result = await _evaluate(case, "NCD-240.4/C8")
    assert result.status is CriterionStatus.MISSING_INFO
    assert not result.case_evidence


async def test_values_straddling_a_threshold_are_uncertain() -> None:
    result = await _evaluate(_case_json("bar-dev-006"), "NCD-100.1/C1")
    assert result.status is CriterionStatus.UNCERTAIN
    assert result.reason_code is ReasonCode.CONFLICTING_EVIDENCE
    assert {"35.2", "34.6"} <= {word for e in result.case_evidence for word in e.quote.split()}


@pytest.mark.parametrize(
    ("case_id", "criterion_id"),
    [
        ("cpap-dev-001", "NCD-240.4/C9"),
        ("cpap-dev-001", "NCD-240.4/C7"),
        ("bar-dev-002", "NCD-100.1/C6"),
    ],
)
async def test_criterion_restricted_to_another_situation_is_not_applicable(
    case_id: str, criterion_id: str
) -> None:
    result = await _evaluate(_case_json(case_id), criterion_id)
    assert result.status is CriterionStatus.NOT_APPLICABLE


async def test_document_text_beats_a_fact_with_a_dropped_negation() -> None:
    case = _with_replaced(
        _case_json("cpap-dev-001"), "PMH: Hypothyroidism", "PMH: No hypertension. Hypothyroidism"
    )
    case["facts"].append(
        {
            "field": "history.hypertension",
            "value": True,
            "confidence": 0.9,
            "source": {"doc_id": "consult-1", "page": 1, "quote": "No hypertension."},
        }
    )
    case = _with_replaced(case, "AHI: 18 events/hour", "AHI: 12 events/hour")
    case = _with_replaced(case, "(AHI 18 events/hour)", "(AHI 12 events/hour)")
    case = _with_replaced(case, '"value": 18,', '"value": 12,')
    case = _with_replaced(case, "Reports waking unrefreshed and dozing while reading. ", "")
    result = await _evaluate(case, "NCD-240.4/C6")
    assert result.status is not CriterionStatus.MET


@pytest.mark.parametrize("case_id", CASES)
async def test_every_citation_is_verifiable(case_id: str) -> None:
    bundle = CaseBundle.model_validate(_case_json(case_id))
    policy = _policy(_policy_of(case_id))
    assert policy.criteria is not None
    for criterion in policy.criteria.criteria:
        result = await _evaluate(bundle, criterion.criterion_id)
        assert all(verify_policy_citation(policy, c) for c in result.policy_citations)
        assert all(verify_case_evidence(bundle, e) for e in result.case_evidence)
        if result.status is CriterionStatus.MET:
            assert result.case_evidence, criterion.criterion_id


async def test_same_input_gives_same_output() -> None:
    case = _case_json("bar-dev-002")
    first = await _evaluate(case, "NCD-100.1/C1")
    second = await _evaluate(case, "NCD-100.1/C1")
    strip = {"usage", "reasoning_trace"}
    assert first.model_dump(exclude=strip) == second.model_dump(exclude=strip)
    assert [s.content for s in first.reasoning_trace] == [s.content for s in second.reasoning_trace]


async def test_result_carries_trace_and_usage() -> None:
    result = await _evaluate(_case_json("cpap-dev-001"), "NCD-240.4/C1")
    assert result.controller == "heuristic"
    assert result.reasoning_trace[0].content.startswith("search terms")
    assert result.reasoning_trace[-1].kind.value == "decision"
    assert result.usage.tool_calls >= 1 and result.usage.latency_ms < 500
    assert 0.0 <= result.confidence <= 1.0
