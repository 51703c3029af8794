"""Durations and time windows: "lasting 12 weeks or longer", "within the past 3 months"."""

from __future__ import annotations

import datetime as dt

import pytest

from reasoning_service.conditions.clinical_text import read_recency, split_sentences
from reasoning_service.conditions.criterion_reading import DURATION, RECENCY, read_criterion
from reasoning_service.conditions.heuristic import HeuristicController
from reasoning_service.models import CaseBundle, CriterionStatus, Policy
from reasoning_service.models.task import CriterionTask
from testdata import load_policy


def acupuncture_policy() -> Policy:
    return load_policy("NCD-30.3.3").model_copy(
        update={"title": "Acupuncture for chronic low back pain"}
    )


def back_pain_case(note: str) -> CaseBundle:
    return CaseBundle(
        case_id="acu-1",
        as_of=dt.date(2026, 6, 1),
        documents=[
            {"doc_id": "visit-1", "title": "Office visit", "date": "2026-05-20", "pages": [note]}
        ],
    )


async def judge(note: str) -> tuple[CriterionStatus, str, list[str]]:
    policy = acupuncture_policy()
    criterion = policy.criteria.criterion("NCD-30.3.3/C1")
    result = await HeuristicController().evaluate(
        CriterionTask(case=back_pain_case(note), policy=policy, criterion=criterion)
    )
    return result.status, result.rationale, [e.quote for e in result.case_evidence]


def test_durations_and_windows_are_read_in_days():
    weeks = read_criterion("The patient has low back pain lasting 12 weeks or longer.")
    assert [(c.quantity, c.low) for c in weeks.constraints] == [(DURATION, 84.0)]
    window = read_criterion("A CABG within the past 3 months.")
    assert [(c.quantity, c.high) for c in window.constraints] == [(RECENCY, 91.3125)]
    age = read_criterion("The patient is 65 years or older.")
    assert [(c.quantity, c.low) for c in age.constraints] == [("age", 65.0)]


@pytest.mark.parametrize(
    ("note", "expected"),
    [
        ("HPI: Chronic low back pain for 5 months despite physical therapy.", "met"),
        ("HPI: Low back pain for 6 weeks after lifting a box.", "not_met"),
        ("HPI: Low back pain for 14 wks. Follow-up visit in 2 weeks.", "met"),
    ],
    ids=["months-over-12-weeks", "weeks-under", "unrelated-interval-ignored"],
)
async def test_a_duration_is_compared_across_units(note: str, expected: str):
    status, rationale, quotes = await judge(note)
    assert status.value == expected, rationale
    assert quotes and all(q in note for q in quotes)


async def test_a_duration_of_something_else_does_not_count():
    status, _, _ = await judge("Knee pain for 6 months. Low back pain noted today.")
    assert status is not CriterionStatus.MET


def test_recency_counts_back_from_as_of_using_the_sentence_date_or_the_document_date():
    text = "PCI with stent on 2026-04-15. Angioplasty was uneventful."
    sentences = split_sentences("cath-1", 1, text)
    found = read_recency(sentences, dt.date(2026, 6, 1), {"cath-1": dt.date(2026, 4, 20)})
    assert next((m.value, text[m.start : m.end]) for m in found) == (47.0, "2026-04-15")
    assert found[1].value == 42.0 and "2026-04-20" in found[1].derived
