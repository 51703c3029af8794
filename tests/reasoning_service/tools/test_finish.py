"""`finish`: its schema, parsing, citation checks and the evidence rule, in one module."""

from __future__ import annotations

import json

from reasoning_service.models import CriterionStatus, ToolCall
from reasoning_service.models.task import CriterionTask
from reasoning_service.tools.finish import (
    FINISH,
    FINISH_PARAMETERS,
    CheckedFinish,
    check_finish,
    citations_retry_message,
    parse_finish,
)
from retrieval import walk

AHI_QUOTE = "AHI or RDI greater than or equal to 15 events per hour, or"
AHI_CASE = {"doc_id": "psg-1", "page": 2, "quote": "AHI: 18 events/hour"}


def finish_call(**arguments: object) -> ToolCall:
    return ToolCall(id="f1", name=FINISH, arguments_json=json.dumps(arguments))


def arguments(policy, **overrides: object) -> dict:
    node = next(n.node_id for n in walk(policy.tree) if AHI_QUOTE in n.text)
    return {
        "status": "met",
        "confidence": 0.9,
        "rationale": "AHI 18 is at least 15.",
        "policy_citations": [{"node_id": node, "quote": AHI_QUOTE}],
        "case_evidence": [AHI_CASE],
        **overrides,
    }


def task(case, policy) -> CriterionTask:
    return CriterionTask(
        case=case, policy=policy, criterion=policy.criteria.criterion("NCD-240.4/C5")
    )


def test_the_schema_lists_every_status_and_requires_the_whole_result():
    statuses = FINISH_PARAMETERS["properties"]["status"]["enum"]
    assert statuses == [s.value for s in CriterionStatus]
    assert set(FINISH_PARAMETERS["required"]) == {
        "status",
        "confidence",
        "rationale",
        "policy_citations",
        "case_evidence",
    }


def test_malformed_arguments_are_a_message_for_the_model():
    message = parse_finish(finish_call(status="probably", confidence=2))
    assert isinstance(message, str) and message.startswith("Invalid arguments for finish")


def test_a_verified_finish_keeps_its_citations_with_offsets(cpap_case, cpap_policy):
    checked = check_finish(task(cpap_case, cpap_policy), finish_call(**arguments(cpap_policy)))
    assert isinstance(checked, CheckedFinish)
    assert checked.status is CriterionStatus.MET and checked.decisive and not checked.problems
    assert checked.policy_citations[0].char_start is not None
    assert checked.case_evidence[0].quote == AHI_CASE["quote"]


def test_unverifiable_quotes_are_dropped_and_described(cpap_case, cpap_policy):
    invented = {"doc_id": "psg-1", "page": 2, "quote": "AHI: 40 events/hour"}
    checked = check_finish(
        task(cpap_case, cpap_policy),
        finish_call(**arguments(cpap_policy, case_evidence=[invented, AHI_CASE])),
    )
    assert isinstance(checked, CheckedFinish)
    assert [e.quote for e in checked.case_evidence] == [AHI_CASE["quote"]]
    assert checked.problems == ['case quote "AHI: 40 events/hour" is not in psg-1']
    assert "call finish again" in citations_retry_message(checked.problems)


def test_a_decision_needs_case_evidence_but_missing_info_does_not(cpap_case, cpap_policy):
    the_task = task(cpap_case, cpap_policy)
    met = check_finish(the_task, finish_call(**arguments(cpap_policy, case_evidence=[])))
    assert isinstance(met, CheckedFinish)
    assert met.problems == ["status met needs at least one case_evidence quote that shows it"]
    missing = check_finish(
        the_task,
        finish_call(**arguments(cpap_policy, status="missing_info", case_evidence=[])),
    )
    assert isinstance(missing, CheckedFinish) and not missing.problems
