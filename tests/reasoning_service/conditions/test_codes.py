"""Atoms that name codes: a coded fact binds by code first, by name second."""

from __future__ import annotations

import pytest

from reasoning_service.conditions.atoms import evaluate_atom
from reasoning_service.models import AtomState
from reasoning_service.models.conditions import FindingAtom, QuantityAtom

from .conftest import make_case

LVEF = QuantityAtom(
    kind="quantity",
    id="lvef",
    label="LVEF ≤ 35%",
    concept="left ventricular ejection fraction",
    aliases=["LVEF"],
    codes=[{"system": "LOINC", "code": "10230-1"}],
    comparator="<=",
    value=35,
    unit="percent",
)
OSA = FindingAtom(
    kind="finding",
    id="osa",
    label="Obstructive sleep apnea",
    concept="obstructive sleep apnea",
    codes=[{"system": "http://hl7.org/fhir/sid/icd-10-cm", "code": "G47.33"}],
)


def fact(field, value, codes=(), unit=None):
    coded = [{"system": system, "code": code} for system, code in codes]
    return {"field": field, "value": value, "unit": unit, "codes": coded}


def test_a_fact_coded_with_the_atoms_code_binds_whatever_its_name(read):
    # A FHIR system URI equals the short name.
    coded = fact("observation.echo_result", 30, [("http://loinc.org", "10230-1")], "%")
    case = make_case(facts=[coded])
    result = evaluate_atom(LVEF, read(case), 0.7)
    assert result.state is AtomState.HOLDS


def test_a_fact_coded_in_the_same_system_with_another_code_does_not_bind_by_name(read):
    other = fact("observation.lvef_biplane_goal", 20, [("LOINC", "99999-9")], "%")
    assert evaluate_atom(LVEF, read(make_case(facts=[other])), 0.7).state is AtomState.NO_EVIDENCE
    uncoded = fact("echo.lvef", 20, [], "%")
    assert evaluate_atom(LVEF, read(make_case(facts=[uncoded])), 0.7).state is AtomState.HOLDS


@pytest.mark.parametrize(("value", "expected"), [(True, AtomState.HOLDS), (False, AtomState.FAILS)])
def test_a_condition_coded_with_icd10_binds_by_code(read, value, expected):
    case = make_case(facts=[fact("condition.problem_1", value, [("ICD-10-CM", "g47.33")])])
    assert evaluate_atom(OSA, read(case), 0.7).state is expected


def test_the_requests_diagnosis_codes_bind_but_a_claim_alone_does_not_show_the_finding(read):
    case = make_case(
        "Sleep clinic referral.",
        request={"diagnoses": [{"system": "ICD-10-CM", "code": "G47.33"}]},
    )
    verdict = evaluate_atom(OSA, read(case), 0.7)
    assert [e.field for e in verdict.evidence] == ["request.diagnoses"]
    assert verdict.state is AtomState.NO_EVIDENCE  # a requested code is not clinical evidence
