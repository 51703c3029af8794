"""Three-valued combination of atom states over a condition tree, and the criterion's status.

| node   | holds            | fails            | otherwise                                   |
| ------ | ---------------- | ---------------- | ------------------------------------------- |
| all_of | every child      | any child        | conflicting if any child is, else no evidence |
| any_of | any child        | every child      | conflicting if any child is, else no evidence |
| not    | the child fails  | the child holds  | unchanged                                   |

An `any_of` marked `same_fact` holds when a child holds and none fails or is conflicting,
and fails when a child fails and none holds or is conflicting; otherwise as above.

`met` needs the tree to hold; `not_met` needs evidence that it fails; no evidence is
`missing_info`; conflicting evidence is `uncertain`.
"""

from __future__ import annotations

from collections.abc import Mapping

from reasoning_service.models import AtomState, CriterionStatus
from reasoning_service.models.conditions import (
    AllOfConditions,
    AnyOfConditions,
    ConditionNode,
    Conditions,
    NotCondition,
)

__all__ = ["combine", "criterion_status"]

_STATUS = {
    AtomState.HOLDS: CriterionStatus.MET,
    AtomState.FAILS: CriterionStatus.NOT_MET,
    AtomState.NO_EVIDENCE: CriterionStatus.MISSING_INFO,
    AtomState.CONFLICTING: CriterionStatus.UNCERTAIN,
}


def combine(node: ConditionNode, states: Mapping[str, AtomState]) -> AtomState:
    """The state of `node`, given each atom's state by atom id."""
    match node:
        case AllOfConditions(all_of=children):
            return _all_of([combine(child, states) for child in children])
        case AnyOfConditions(any_of=children, silent_children=silent, same_fact=same_fact):
            results = [combine(child, states) for child in children]
            if same_fact and AtomState.HOLDS in results and _doubted(results):
                return AtomState.CONFLICTING  # another reading of the fact denies or doubts it
            if (silent == "fail" or same_fact) and AtomState.FAILS in results:
                results = [AtomState.FAILS if r is AtomState.NO_EVIDENCE else r for r in results]
            return _any_of(results)
        case NotCondition(not_=child):
            return _negate(combine(child, states))
    return states[node.id]


def criterion_status(conditions: Conditions, states: Mapping[str, AtomState]) -> CriterionStatus:
    """The criterion's status: applicability first, then what it requires."""
    if conditions.applies_if is not None:
        applies = combine(conditions.applies_if, states)
        if applies is AtomState.FAILS:
            return CriterionStatus.NOT_APPLICABLE
        unknown = applies is AtomState.NO_EVIDENCE
        if unknown and conditions.when_applicability_unknown == "not_applicable":
            return CriterionStatus.NOT_APPLICABLE
    return _STATUS[combine(conditions.require, states)]


def _all_of(children: list[AtomState]) -> AtomState:
    if AtomState.FAILS in children:
        return AtomState.FAILS
    if all(child is AtomState.HOLDS for child in children):
        return AtomState.HOLDS
    return _undecided(children)


def _any_of(children: list[AtomState]) -> AtomState:
    if AtomState.HOLDS in children:
        return AtomState.HOLDS
    if all(child is AtomState.FAILS for child in children):
        return AtomState.FAILS
    return _undecided(children)


def _undecided(children: list[AtomState]) -> AtomState:
    if AtomState.CONFLICTING in children:
        return AtomState.CONFLICTING
    return AtomState.NO_EVIDENCE


def _doubted(children: list[AtomState]) -> bool:
    return AtomState.FAILS in children or AtomState.CONFLICTING in children


def _negate(state: AtomState) -> AtomState:
    return {AtomState.HOLDS: AtomState.FAILS, AtomState.FAILS: AtomState.HOLDS}.get(state, state)
