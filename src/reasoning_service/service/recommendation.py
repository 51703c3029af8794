"""Combine criterion results by the policy's logic into `approve` or `pend_for_review`.

The logic is evaluated in three values (Kleene): a criterion is True when `met`, False when
`not_met`, unknown when `missing_info` or `uncertain` (or not evaluated), and drops out when
`not_applicable`. `approve` needs the whole tree to be True and no result whose citations failed
verification (`invalid_citation`: something tried to pass unverifiable evidence, so a human
looks); anything else pends for a human. The service never denies.
"""

from __future__ import annotations

from reasoning_service.models import (
    AllOf,
    AnyOf,
    CriteriaSet,
    CriterionResult,
    CriterionStatus,
    LogicNode,
    Not,
    OpenCriterion,
    ReasonCode,
    Recommendation,
)

_NEUTRAL = "neutral"
Truth = bool | None | str  # True, False, None (unknown) or _NEUTRAL (not applicable)


def evaluate_logic(node: LogicNode, statuses: dict[str, CriterionStatus]) -> Truth:
    """Truth value of a logic tree given criterion statuses."""
    match node:
        case str():
            return _truth(statuses.get(node))
        case AllOf(all_of=children):
            return _combine([evaluate_logic(c, statuses) for c in children], all_required=True)
        case AnyOf(any_of=children):
            return _combine([evaluate_logic(c, statuses) for c in children], all_required=False)
        case Not(not_=child):
            value = evaluate_logic(child, statuses)
            return value if value is None or value == _NEUTRAL else not value
    raise TypeError(f"not a logic node: {node!r}")


def _truth(status: CriterionStatus | None) -> Truth:
    match status:
        case CriterionStatus.MET:
            return True
        case CriterionStatus.NOT_MET:
            return False
        case CriterionStatus.NOT_APPLICABLE:
            return _NEUTRAL
    return None


def _combine(values: list[Truth], *, all_required: bool) -> Truth:
    values = [v for v in values if v != _NEUTRAL]
    if not values:
        return _NEUTRAL
    decisive = not all_required  # any_of is settled by one True, all_of by one False
    if decisive in values:
        return decisive
    if None in values:
        return None
    return not decisive


def recommend(
    criteria: CriteriaSet, results: list[CriterionResult]
) -> tuple[Recommendation, list[OpenCriterion], str]:
    """Return the recommendation, the criteria that keep the case open, and a one-line summary."""
    statuses = {r.criterion_id: r.status for r in results}
    satisfied = evaluate_logic(criteria.logic, statuses) is True
    open_criteria = [_open(criteria, r) for r in results if _is_open(r.status)]
    invalid = [r for r in results if r.reason_code is ReasonCode.INVALID_CITATION]
    if satisfied and not invalid:
        return Recommendation.APPROVE, open_criteria, "All required criteria are met."
    missing = [cid for cid in _logic_order(criteria) if cid not in statuses]
    summary = _pend_summary(open_criteria, missing, invalid_citations=len(invalid))
    return Recommendation.PEND_FOR_REVIEW, open_criteria, summary


def _is_open(status: CriterionStatus) -> bool:
    return status in {
        CriterionStatus.NOT_MET,
        CriterionStatus.MISSING_INFO,
        CriterionStatus.UNCERTAIN,
    }


def _open(criteria: CriteriaSet, result: CriterionResult) -> OpenCriterion:
    criterion = criteria.criterion(result.criterion_id)
    text = criterion.text if criterion else result.criterion_id
    request = {
        CriterionStatus.MISSING_INFO: f"Documentation showing: {text}",
        CriterionStatus.UNCERTAIN: f"Documentation that resolves: {text}",
        CriterionStatus.NOT_MET: f"Any documentation that the following holds: {text}",
    }.get(result.status)
    return OpenCriterion(
        criterion_id=result.criterion_id,
        status=result.status,
        text=text,
        documentation_to_request=request,
    )


def _logic_order(criteria: CriteriaSet) -> list[str]:
    return [c.criterion_id for c in criteria.criteria]


def _pend_summary(
    open_criteria: list[OpenCriterion], not_evaluated: list[str], *, invalid_citations: int = 0
) -> str:
    counts: dict[str, int] = {}
    for item in open_criteria:
        counts[item.status.value] = counts.get(item.status.value, 0) + 1
    parts = [f"{n} {status}" for status, n in sorted(counts.items())]
    if not_evaluated:
        parts.append(f"{len(not_evaluated)} not evaluated")
    if invalid_citations:
        parts.append(f"{invalid_citations} with citations that failed verification")
    detail = ", ".join(parts) if parts else "the policy logic is not satisfied"
    return f"Pended for clinical review: {detail}."
