"""Three-valued combination: `met` only when the tree holds, `not_met` only on a failure."""

from __future__ import annotations

import pytest

from reasoning_service.conditions.combine import combine, criterion_status
from reasoning_service.models import AtomState, CriterionStatus
from reasoning_service.models.conditions import Conditions

H, F, N, C = AtomState.HOLDS, AtomState.FAILS, AtomState.NO_EVIDENCE, AtomState.CONFLICTING


def finding(atom_id: str) -> dict:
    return {"kind": "finding", "id": atom_id, "label": atom_id, "concept": atom_id}


def conditions(require: dict, **extra: object) -> Conditions:
    return Conditions.model_validate({"require": require, **extra})


@pytest.mark.parametrize(
    ("a", "b", "all_of", "any_of"),
    [
        (H, H, H, H),
        (H, F, F, H),
        (F, C, F, C),
        (H, N, N, H),
        (H, C, C, H),
        (N, C, C, C),
        (F, F, F, F),
        (F, N, F, N),
    ],
)
def test_all_of_and_any_of_follow_the_three_valued_table(a, b, all_of, any_of):
    states = {"a": a, "b": b}
    assert combine(conditions({"all_of": [finding("a"), finding("b")]}).require, states) is all_of
    assert combine(conditions({"any_of": [finding("a"), finding("b")]}).require, states) is any_of


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(H, F, C), (H, C, C), (H, N, H), (F, N, F), (F, F, F), (H, H, H), (F, C, C), (N, N, N)],
)
def test_readings_of_one_fact_that_disagree_are_conflicting_not_a_choice(a, b, expected):
    node = conditions({"any_of": [finding("a"), finding("b")], "same_fact": True}).require
    assert combine(node, {"a": a, "b": b}) is expected


@pytest.mark.parametrize(("state", "negated"), [(H, F), (F, H), (N, N), (C, C)])
def test_not_swaps_holds_and_fails_only(state, negated):
    assert combine(conditions({"not": finding("a")}).require, {"a": state}) is negated


@pytest.mark.parametrize(
    ("state", "status"),
    [
        (H, CriterionStatus.MET),
        (F, CriterionStatus.NOT_MET),
        (N, CriterionStatus.MISSING_INFO),
        (C, CriterionStatus.UNCERTAIN),
    ],
)
def test_the_required_tree_gives_the_status(state, status):
    assert criterion_status(conditions(finding("a")), {"a": state}) is status


def test_a_failed_precondition_makes_the_criterion_not_applicable():
    rule = conditions(finding("a"), applies_if=finding("renewal"))
    assert criterion_status(rule, {"renewal": F, "a": N}) is CriterionStatus.NOT_APPLICABLE
    assert criterion_status(rule, {"renewal": H, "a": N}) is CriterionStatus.MISSING_INFO


def test_unknown_applicability_is_judged_unless_the_criterion_says_otherwise():
    judged = conditions(finding("a"), applies_if=finding("short_sleep"))
    skipped = conditions(
        finding("a"), applies_if=finding("short_sleep"), when_applicability_unknown="not_applicable"
    )
    assert criterion_status(judged, {"short_sleep": N, "a": F}) is CriterionStatus.NOT_MET
    assert criterion_status(skipped, {"short_sleep": N, "a": F}) is CriterionStatus.NOT_APPLICABLE


def test_silent_alternatives_fail_once_the_case_rules_one_out_where_the_conditions_say_so():
    listed = {"any_of": [finding("htn"), finding("stroke")], "silent_children": "fail"}
    plain = {"any_of": [finding("htn"), finding("stroke")]}
    assert combine(conditions(listed).require, {"htn": F, "stroke": N}) is F
    assert combine(conditions(plain).require, {"htn": F, "stroke": N}) is N
    assert combine(conditions(listed).require, {"htn": N, "stroke": N}) is N
    assert combine(conditions(listed).require, {"htn": F, "stroke": H}) is H


@pytest.mark.parametrize(
    ("other", "expected"),
    [(H, F), (N, N), (C, C)],
)
def test_a_failure_known_only_from_silence_does_not_decide_an_undecided_all_of(other, expected):
    tree = conditions({"all_of": [finding("trials"), finding("intolerance")]}).require
    states = {"trials": other, "intolerance": F}
    assert combine(tree, states, silent={"intolerance"}) is expected
    assert combine(tree, states) is F  # a failure on evidence decides whatever else is unknown
