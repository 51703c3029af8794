"""Reviewed conditions travel with a criterion's exact wording."""

from __future__ import annotations

import json

from reasoning_service.conditions import ConditionsLibrary
from reasoning_service.models import CriteriaSet
from testdata import EXAMPLES


def bare(policy_id: str) -> dict:
    raw = json.loads((EXAMPLES / "criteria" / f"{policy_id}.json").read_text())
    for criterion in raw["criteria"]:
        criterion.pop("conditions", None)
    return raw


def test_criteria_without_conditions_get_the_reviewed_ones_for_the_same_text():
    library = ConditionsLibrary.from_folder(EXAMPLES)
    attached = library.attach(CriteriaSet.model_validate(bare("NCD-20.4")))
    assert all(c.conditions is not None for c in attached.criteria)


def test_a_reworded_criterion_or_another_version_gets_none():
    library = ConditionsLibrary.from_folder(EXAMPLES)
    raw = bare("NCD-20.4")
    raw["criteria"][0]["text"] += " (reworded)"
    attached = library.attach(CriteriaSet.model_validate(raw))
    assert attached.criteria[0].conditions is None
    assert attached.criteria[1].conditions is not None
    raw["version"] = "6"
    assert all(
        c.conditions is None for c in library.attach(CriteriaSet.model_validate(raw)).criteria
    )


def test_an_older_review_of_the_same_criterion_is_replaced():
    library = ConditionsLibrary.from_folder(EXAMPLES)
    raw = json.loads((EXAMPLES / "criteria" / "NCD-240.4.json").read_text())
    raw["criteria"][0]["conditions"] = {
        "require": {"kind": "finding", "id": "old", "label": "old", "concept": "old review"}
    }
    attached = library.attach(CriteriaSet.model_validate(raw))
    assert attached.criteria[0].conditions.atoms()[0].id != "old"


def test_conditions_a_criterion_brings_are_kept(tmp_path):
    library = ConditionsLibrary.from_folder(EXAMPLES)
    own = CriteriaSet.model_validate(
        json.loads((EXAMPLES / "criteria" / "NCD-240.4.json").read_text())
    )
    assert library.attach(own) == own
    assert len(ConditionsLibrary.from_folder(tmp_path)) == 0
