"""Three-valued combination of atom states over a condition tree, and the criterion's status.

| node   | holds            | fails            | otherwise                                   |
| ------ | ---------------- | ---------------- | ------------------------------------------- |
| all_of | every child      | any child        | conflicting if any child is, else no evidence |
| any_of | any child        | every child      | conflicting if any child is, else no evidence |
| not    | the child fails  | the child holds  | unchanged                                   |

An `any_of` marked `same_fact` holds when a child holds and none fails or is conflicting,
and fails when a child fails and none holds or is conflicting; otherwise as above.

`met` needs the tree to hold; `not_met` needs evidence that it fails; no evidence is
`missing_info`; conflicting evidence is `uncertain`. A failure known only from the case's
silence (an atom's `when_silent`) does not decide an `all_of` that another child leaves
undecided: a record that says nothing of the trials says nothing of their side effects either.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

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
_DECIDED = (AtomState.HOLDS, AtomState.FAILS)


def combine(
    node: ConditionNode, states: Mapping[str, AtomState], silent: AbstractSet[str] = frozenset()
) -> AtomState:
    """The state of `node`, given each atom's state by atom id and the atoms decided only by
    the case's silence."""
    return _combined(node, states, silent).state


@dataclass(frozen=True, slots=True)
class _Combined:
    state: AtomState
    by_silence: bool = False
    """The state rests on an atom decided only by the case's silence."""


def _combined(
    node: ConditionNode, states: Mapping[str, AtomState], silent: AbstractSet[str]
) -> _Combined:
    match node:
        case AllOfConditions(all_of=children):
            return _all_of([_combined(child, states, silent) for child in children])
        case AnyOfConditions(any_of=children, silent_children=silent_children, same_fact=same):
            results = [_combined(child, states, silent) for child in children]
            found = [r.state for r in results]
            if same and AtomState.HOLDS in found and _doubted(found):
                return _Combined(AtomState.CONFLICTING)  # another reading denies or doubts it
            if (silent_children == "fail" or same) and AtomState.FAILS in found:
                results = [
                    _Combined(AtomState.FAILS) if r.state is AtomState.NO_EVIDENCE else r
                    for r in results
                ]
            return _any_of(results)
        case NotCondition(not_=child):
            inner = _combined(child, states, silent)
            return _Combined(_negate(inner.state), inner.by_silence)
    return _Combined(states[node.id], node.id in silent)


def criterion_status(
    conditions: Conditions,
    states: Mapping[str, AtomState],
    silent: AbstractSet[str] = frozenset(),
) -> CriterionStatus:
    """The criterion's status: applicability first, then what it requires."""
    if conditions.applies_if is not None:
        applies = combine(conditions.applies_if, states, silent)
        if applies is AtomState.FAILS:
            return CriterionStatus.NOT_APPLICABLE
        unknown = applies is AtomState.NO_EVIDENCE
        if unknown and conditions.when_applicability_unknown == "not_applicable":
            return CriterionStatus.NOT_APPLICABLE
    return _STATUS[combine(conditions.require, states, silent)]


def _all_of(children: list[_Combined]) -> _Combined:
    failing = [child for child in children if child.state is AtomState.FAILS]
    undecided = [child.state for child in children if child.state not in _DECIDED]
    if failing and not all(child.by_silence for child in failing):
        return _Combined(AtomState.FAILS)
    if failing:
        return _Combined(_undecided(undecided)) if undecided else _Combined(AtomState.FAILS, True)
    if not undecided:
        return _Combined(AtomState.HOLDS, any(child.by_silence for child in children))
    return _Combined(_undecided(undecided))


def _any_of(children: list[_Combined]) -> _Combined:
    holding = [child for child in children if child.state is AtomState.HOLDS]
    if holding:
        return _Combined(AtomState.HOLDS, all(child.by_silence for child in holding))
    if all(child.state is AtomState.FAILS for child in children):
        return _Combined(AtomState.FAILS, any(child.by_silence for child in children))
    return _Combined(_undecided([child.state for child in children]))


def _undecided(children: list[AtomState]) -> AtomState:
    if AtomState.CONFLICTING in children:
        return AtomState.CONFLICTING
    return AtomState.NO_EVIDENCE


def _doubted(children: list[AtomState]) -> bool:
    return AtomState.FAILS in children or AtomState.CONFLICTING in children


def _negate(state: AtomState) -> AtomState:
    return {AtomState.HOLDS: AtomState.FAILS, AtomState.FAILS: AtomState.HOLDS}.get(state, state)
