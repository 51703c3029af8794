"""A FHIR R4 Bundle mapped to a case bundle: provenance carried, bad bundles named, no values."""

from __future__ import annotations

import base64
import copy
import json

import pytest

from reasoning_service.errors import InvalidInputError
from reasoning_service.fhir import FhirLimits, case_from_fhir
from reasoning_service.models import CaseBundle
from testdata import EXAMPLES

FHIR = EXAMPLES / "fhir"


def bundle(name: str = "cpap-example-001.bundle.json") -> dict:
    return json.loads((FHIR / name).read_text(encoding="utf-8"))


def entry_of(raw: dict, kind: str, n: int = 0) -> dict:
    return [e for e in raw["entry"] if e["resource"]["resourceType"] == kind][n]["resource"]


def test_the_cpap_bundle_maps_to_the_case_it_was_made_from():
    case = case_from_fhir(bundle())
    original = CaseBundle.model_validate_json(
        (EXAMPLES / "cases" / "cpap-example-001.json").read_text()
    )
    assert case.as_of == original.as_of and case.patient == original.patient
    assert [d.pages for d in case.documents] == [d.pages for d in original.documents]
    assert [c.code for c in case.request.codes] == ["E0601"]
    assert case.request.diagnoses[0].system == "ICD-10-CM"
    assert case.request.urgency == "standard"
    ahi = next(f for f in case.facts if f.field == "observation.sleep_study_ahi")
    assert ahi.value == 11 and ahi.unit == "events/hour" and ahi.confidence == 0.97
    assert ahi.source is not None and ahi.source.doc_id == "hst-1"
    assert ahi.source.quote == "AHI: 11 events/hour"
    assert ahi.provenance is not None
    assert (ahi.provenance.resource_type, ahi.provenance.ucum_unit) == ("Observation", "/h")
    htn = next(f for f in case.facts if "hypertension" in f.field)
    assert htn.value is True and htn.provenance.resource_type == "Condition"


def test_the_pdf_bundle_reads_its_attachments_page_by_page():
    case = case_from_fhir(bundle("bar-tb-001-pdf.bundle.json"))
    consult = case.document("surg-consult")
    assert consult is not None and "BMI: 35.0 kg/m2" in consult.pages[0]


def test_codes_and_ucum_units_are_carried_on_facts():
    raw = bundle()
    observation = entry_of(raw, "Observation", 4)
    observation["code"]["coding"] = [{"system": "http://loinc.org", "code": "12345-6"}]
    case = case_from_fhir(raw)
    coded = next(f for f in case.facts if f.codes)
    assert (coded.codes[0].system, coded.codes[0].code) == ("LOINC", "12345-6")


def _broken(change) -> dict:
    raw = copy.deepcopy(bundle())
    change(raw)
    return raw


def _drop_patient(raw):
    raw["entry"] = [e for e in raw["entry"] if e["resource"]["resourceType"] != "Patient"]


def _bad_base64(raw):
    entry_of(raw, "DocumentReference")["content"][0]["attachment"]["data"] = "@@not base64@@"


def _observation_without_value(raw):
    observation = entry_of(raw, "Observation", 4)
    observation.pop("valueQuantity")


def _unknown_reference(raw):
    entry_of(raw, "Observation")["subject"] = {"reference": "Patient/nobody-here"}


def _unknown_source_document(raw):
    entry_of(raw, "Observation")["derivedFrom"] = [{"reference": "DocumentReference/missing"}]


def _bad_birth_date(raw):
    entry_of(raw, "Patient")["birthDate"] = "1965-02-30"


def _bad_datetime(raw):
    entry_of(raw, "Observation")["effectiveDateTime"] = "2026-13-45T99:00"


def _wrong_resource_type(raw):
    raw["resourceType"] = "Patient"


def _unknown_entry_type(raw):
    raw["entry"][0]["resource"]["resourceType"] = "Spaceship"


def _unknown_element(raw):
    entry_of(raw, "Patient")["favouriteColour"] = "blue"


def _two_patients(raw):
    raw["entry"].append({"resource": {"resourceType": "Patient", "id": "other"}})


def _entry_without_resource(raw):
    raw["entry"].append({"fullUrl": "urn:example:x"})


def _quantity_not_a_number(raw):
    entry_of(raw, "Observation", 4)["valueQuantity"]["value"] = "kinda-eleven"


def _not_utf8(raw):
    attachment = entry_of(raw, "DocumentReference")["content"][0]["attachment"]
    attachment["data"] = base64.b64encode(b"\xff\xfe\xfa bad").decode()


def _not_a_pdf(raw):
    attachment = entry_of(raw, "DocumentReference")["content"][0]["attachment"]
    attachment["contentType"] = "application/pdf"


def _entry_not_a_list(raw):
    raw["entry"] = {"resource": {}}


BROKEN = {
    "missing Patient": (_drop_patient, "no Patient"),
    "wrong resourceType": (_wrong_resource_type, "fhir_bundle.resourceType"),
    "unknown resource type": (_unknown_entry_type, "not a FHIR R4 resource type"),
    "bad base64": (_bad_base64, "(DocumentReference).content[0].attachment.data"),
    "bad birth date": (_bad_birth_date, "(Patient).birthDate: is not a valid date"),
    "bad dateTime": (_bad_datetime, "(Observation).effectiveDateTime"),
    "unknown reference": (_unknown_reference, "(Observation).subject: refers to a resource"),
    "unknown source document": (_unknown_source_document, "(Observation).derivedFrom[0]"),
    "Observation without value": (_observation_without_value, "(Observation).value[x]"),
    "unknown element": (_unknown_element, "(Patient).favouriteColour"),
    "two patients": (_two_patients, "more than one Patient"),
    "entry without resource": (_entry_without_resource, ".resource: is required"),
    "quantity not a number": (_quantity_not_a_number, "(Observation).valueQuantity.value"),
    "text not UTF-8": (_not_utf8, "not UTF-8 text"),
    "PDF that is not one": (_not_a_pdf, "not a readable PDF"),
    "entry not a list": (_entry_not_a_list, "fhir_bundle.entry: must be a list"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_malformed_bundle_is_refused_naming_the_resource_and_element(name):
    change, says = BROKEN[name]
    with pytest.raises(InvalidInputError) as raised:
        case_from_fhir(_broken(change))
    message = str(raised.value)
    assert says in message, message
    for value in ("nobody-here", "1965-02-30", "2026-13-45", "blue", "kinda-final", "@@"):
        assert value not in message


def test_an_attachment_over_the_limit_is_refused_with_the_limit():
    with pytest.raises(InvalidInputError, match="larger than the limit of 100 bytes"):
        case_from_fhir(bundle(), limits=FhirLimits(max_attachment_bytes=100))
