"""The conditions schema: every bundled criterion's conditions load, and a bad tree is an error
that names the criterion and the path inside the tree."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from reasoning_service.models import CriteriaSet
from reasoning_service.models.conditions import Conditions, affirming_atoms_of
from testdata import EXAMPLES

POLICIES = ["NCD-240.4", "NCD-100.1", "NCD-20.4", "LCD-L34641", "NCD-30.3.3"]


def criteria_json(policy_id: str) -> dict:
    return json.loads((EXAMPLES / "criteria" / f"{policy_id}.json").read_text())


@pytest.mark.parametrize("policy_id", POLICIES)
def test_every_bundled_criterion_has_valid_conditions(policy_id):
    criteria = CriteriaSet.model_validate(criteria_json(policy_id))
    assert all(c.conditions is not None and c.conditions.atoms() for c in criteria.criteria)


def test_criteria_without_conditions_still_load():
    raw = criteria_json("NCD-240.4")
    for criterion in raw["criteria"]:
        criterion.pop("conditions")
    assert all(c.conditions is None for c in CriteriaSet.model_validate(raw).criteria)


@pytest.mark.parametrize(
    ("broken", "path", "message"),
    [
        ({"kind": "finding", "id": "x", "label": "x", "concept": "x", "expect": "maybe"},
         "require.all_of.1.finding.expect", "'present' or 'absent'"),
        ({"kind": "quantity", "id": "x", "label": "x", "concept": "x", "comparator": "~",
          "value": 1, "unit": "kg"}, "require.all_of.1.quantity.comparator", ">="),
        ({"kind": "time_window", "id": "x", "label": "x", "concept": "x", "relation": "between",
          "amount": 3, "unit": "months"}, "require.all_of.1.time_window", "amount_max"),
        ({"kind": "category", "id": "x", "label": "x", "concept": "x", "values": {"a": ["a"]},
          "allowed": ["b"]}, "require.all_of.1.category", "not in `values`"),
        ({"kind": "category", "id": "x", "label": "x", "concept": "x", "values": {"a": ["a"]},
          "allowed": ["a"], "min_count": 2, "select": "latest"}, "require.all_of.1.category",
         "min_count 1"),
        ({"kind": "quantity", "id": "x", "label": "x", "concept": "x", "comparator": ">=",
          "value": 1, "unit": "kg", "derive": {"formula": "__import__('os')",
                                               "inputs": {"w": {"concept": "w", "unit": "kg"}}}},
         "require.all_of.1.quantity.derive", "not allowed"),
        ({"kind": "smell", "id": "x"}, "require.all_of.1", "kind"),
    ],
)  # fmt: skip
def test_a_bad_tree_names_the_criterion_and_the_path(broken, path, message):
    raw = criteria_json("NCD-240.4")
    first = raw["criteria"][0]
    first["conditions"] = {"require": {"all_of": [first["conditions"]["require"], broken]}}
    with pytest.raises(ValidationError) as error:
        CriteriaSet.model_validate(raw)
    text = str(error.value)
    assert "conditions of NCD-240.4/C1" in text
    assert path in text and message in text


def test_atom_ids_are_unique_within_a_criterion():
    atom = {"kind": "finding", "id": "same", "label": "a", "concept": "a"}
    with pytest.raises(ValidationError, match="unique"):
        Conditions.model_validate({"require": {"all_of": [atom, {**atom, "concept": "b"}]}})


def test_the_atoms_that_speak_for_met_are_those_under_no_not():
    def finding(atom_id: str) -> dict[str, str]:
        return {"kind": "finding", "id": atom_id, "label": atom_id, "concept": atom_id}

    conditions = Conditions.model_validate(
        {"require": {"all_of": [finding("a"), {"not": finding("b")}, {"any_of": [finding("c")]}]}}
    )
    assert [atom.id for atom in affirming_atoms_of(conditions.require)] == ["a", "c"]
