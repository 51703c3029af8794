"""The policy logic decides `approve` only when it is satisfied by met results; never a denial."""

from __future__ import annotations

import pytest

from reasoning_service.models import CriteriaSet, CriterionResult, CriterionStatus, Recommendation
from reasoning_service.service.recommendation import evaluate_logic, recommend

MET, NOT_MET, MISSING, UNCERTAIN, NA = (
    CriterionStatus.MET,
    CriterionStatus.NOT_MET,
    CriterionStatus.MISSING_INFO,
    CriterionStatus.UNCERTAIN,
    CriterionStatus.NOT_APPLICABLE,
)

CRITERIA = CriteriaSet.model_validate(
    {
        "policy_id": "P",
        "version": "1",
        "criteria": [{"criterion_id": f"C{i}", "text": f"criterion {i}"} for i in range(1, 6)],
        "logic": {"all_of": ["C1", {"any_of": ["C2", "C3"]}, {"not": "C4"}, "C5"]},
    }
)


def results(**statuses: CriterionStatus) -> list[CriterionResult]:
    return [
        CriterionResult(
            criterion_id=cid, status=s, confidence=0.9, rationale="r", controller="heuristic"
        )
        for cid, s in statuses.items()
    ]


def test_all_required_met_approves():
    rec, open_criteria, _ = recommend(
        CRITERIA, results(C1=MET, C2=MET, C3=NOT_MET, C4=NOT_MET, C5=MET)
    )
    assert rec is Recommendation.APPROVE
    assert [o.criterion_id for o in open_criteria] == ["C3", "C4"]


def test_one_branch_of_any_of_is_enough_but_an_unknown_branch_alone_is_not():
    branch = CRITERIA.logic.all_of[1]  # any_of C2, C3
    assert evaluate_logic(branch, {"C2": MET}) is True
    assert evaluate_logic(branch, {"C2": MISSING, "C3": NOT_MET}) is None
    assert evaluate_logic(branch, {"C2": NOT_MET, "C3": NOT_MET}) is False


def test_an_exclusion_that_holds_pends():
    rec, _, summary = recommend(CRITERIA, results(C1=MET, C2=MET, C3=MET, C4=MET, C5=MET))
    assert rec is Recommendation.PEND_FOR_REVIEW
    assert "review" in summary


@pytest.mark.parametrize("status", [NOT_MET, MISSING, UNCERTAIN])
def test_anything_short_of_met_pends_and_asks_for_documentation(status: CriterionStatus):
    rec, open_criteria, _ = recommend(CRITERIA, results(C1=status, C2=MET, C4=NOT_MET, C5=MET))
    assert rec is Recommendation.PEND_FOR_REVIEW
    c1 = next(o for o in open_criteria if o.criterion_id == "C1")
    assert c1.documentation_to_request and "criterion 1" in c1.documentation_to_request


def test_not_applicable_drops_out_of_all_of():
    rec, _, _ = recommend(CRITERIA, results(C1=MET, C2=MET, C4=NOT_MET, C5=NA))
    assert rec is Recommendation.APPROVE


def test_criteria_not_evaluated_keep_the_case_pending():
    rec, _, summary = recommend(CRITERIA, results(C1=MET, C2=MET))
    assert rec is Recommendation.PEND_FOR_REVIEW
    assert "not evaluated" in summary


def test_there_is_no_deny():
    assert {r.value for r in Recommendation} == {"approve", "pend_for_review"}


def test_a_failed_citation_anywhere_never_approves():
    """C3 is an unneeded any_of branch, yet its citation failed: someone tried to pass
    unverifiable evidence, so a human looks."""
    from reasoning_service.models import ReasonCode

    given = results(C1=MET, C2=MET, C3=UNCERTAIN, C4=NOT_MET, C5=MET)
    given[2] = given[2].model_copy(update={"reason_code": ReasonCode.INVALID_CITATION})
    rec, _, summary = recommend(CRITERIA, given)
    assert rec is Recommendation.PEND_FOR_REVIEW
    assert "1 with citations that failed verification" in summary
