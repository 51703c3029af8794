"""The case bundle: what the service evaluates (FORMATS.md, "Case bundle")."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field, model_validator

FactValue = str | int | float | bool | dt.date | list[str | int | float | bool] | None


class _Contract(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


_CODE_SYSTEMS = {
    "http://loinc.org": "LOINC",
    "http://snomed.info/sct": "SNOMED CT",
    "http://hl7.org/fhir/sid/icd-10-cm": "ICD-10-CM",
    "http://hl7.org/fhir/sid/icd-10": "ICD-10",
    "https://bluebutton.cms.gov/resources/codesystem/hcpcs": "HCPCS",
    "http://www.cms.gov/medicare/coding/hcpcsreleasecodesets": "HCPCS",
    "urn:oid:2.16.840.1.113883.6.285": "HCPCS",
    "http://www.ama-assn.org/go/cpt": "CPT",
    "http://www.nlm.nih.gov/research/umls/rxnorm": "RxNorm",
    "http://unitsofmeasure.org": "UCUM",
}
"""FHIR code system URIs and the short names case bundles and criteria use for them."""
_SHORT_NAMES = {name.lower(): name for name in _CODE_SYSTEMS.values()} | {
    "snomed": "SNOMED CT",
    "snomedct": "SNOMED CT",
    "icd10cm": "ICD-10-CM",
}


def code_system_name(system: str) -> str:
    """The short name of a code system (`LOINC`, `ICD-10-CM`), from a FHIR URI or a spelling."""
    key = system.strip().rstrip("/")
    return _CODE_SYSTEMS.get(key.lower()) or _SHORT_NAMES.get(key.lower()) or key


def code_system_uri(name: str) -> str | None:
    """The FHIR URI of a short code system name, or None when it has none here."""
    canonical = code_system_name(name)
    return next((uri for uri, short in _CODE_SYSTEMS.items() if short == canonical), None)


class Code(_Contract):
    """A coded item such as an HCPCS, CPT or ICD-10-CM code."""

    system: str
    """A short name (`LOINC`, `SNOMED CT`, `ICD-10-CM`, `HCPCS`, `CPT`) or a FHIR system URI;
    both spellings compare equal."""
    code: str
    display: str | None = None

    def key(self) -> tuple[str, str]:
        """What two codes compare by: the system's short name and the code, case-insensitively."""
        return code_system_name(self.system).lower(), self.code.strip().lower()


class ServiceRequest(_Contract):
    """What is being requested."""

    service: str = ""
    """Free-text name of the requested service or device."""
    codes: list[Code] = Field(default_factory=list)
    diagnoses: list[Code] = Field(default_factory=list)
    urgency: str | None = None


class Patient(_Contract):
    """Demographics; anything else about the patient is a fact with provenance."""

    age: int | None = Field(default=None, ge=0, le=130)
    sex: str | None = None


class FactSource(_Contract):
    """Where an extracted fact came from."""

    doc_id: str
    page: int | None = Field(default=None, ge=1)
    """1-based page of the document."""
    quote: str = ""
    """Text of the page the fact was read from (verbatim when the extractor was right)."""


class FactProvenance(_Contract):
    """The structured record a fact was mapped from (a FHIR resource), when there was one."""

    resource_type: str
    """`Observation`, `Condition`, `Procedure`, `MedicationRequest`, `Claim` …"""
    resource_id: str | None = None
    element: str | None = None
    """The element the value came from (`valueQuantity`, `component[0].valueQuantity`)."""
    ucum_unit: str | None = None
    """The value's UCUM unit code (`/h`, `%`, `kg/m2`), when the record gave one."""


class Fact(_Contract):
    """One value extracted from the clinical documents."""

    field: str = Field(min_length=1)
    """Dotted name, e.g. `sleep_study.ahi`."""
    value: FactValue = None
    unit: str | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    """The extractor's confidence in this fact."""
    source: FactSource | None = None
    codes: list[Code] = Field(default_factory=list)
    """What the fact is, coded (LOINC for an observation, ICD-10-CM or SNOMED CT for a
    condition): an atom that names codes binds a coded fact by code first (docs/conditions.md)."""
    provenance: FactProvenance | None = None
    """The FHIR resource the fact was mapped from (`fhir/inbound.py`)."""


class Document(_Contract):
    """One clinical document, as text per page."""

    doc_id: str = Field(min_length=1)
    title: str = ""
    date: dt.date | None = None
    pages: list[str] = Field(default_factory=list)


class CaseBundle(_Contract):
    """Facts extracted from a patient's documents, with provenance, plus the documents' text."""

    case_id: str = Field(min_length=1, max_length=200)
    as_of: dt.date | None = None
    """The date time windows are measured back from; today when absent."""
    request: ServiceRequest = Field(default_factory=ServiceRequest)
    patient: Patient = Field(default_factory=Patient)
    facts: list[Fact] = Field(default_factory=list)
    documents: list[Document] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_documents(self) -> CaseBundle:
        seen: set[str] = set()
        for index, document in enumerate(self.documents):
            if document.doc_id in seen:
                # Named by position: a doc id can be patient-linked, so it is never echoed.
                raise ValueError(f"documents[{index}].doc_id: the same doc_id appears twice")
            seen.add(document.doc_id)
        has_text = any(page.strip() for document in self.documents for page in document.pages)
        if not self.facts and not has_text:
            raise ValueError("case has no facts and no document text: there is nothing to evaluate")
        return self

    def document(self, doc_id: str) -> Document | None:
        """Return the document with `doc_id`, or None."""
        return next((d for d in self.documents if d.doc_id == doc_id), None)

    def request_facts(self) -> list[Fact]:
        """The demographics and the request as facts (`patient.age`, `request.service`, ...).

        They have no document behind them: their evidence is the field and its value.
        """
        request, patient = self.request, self.patient
        candidates: list[tuple[str, FactValue, str | None, list[Code]]] = [
            ("patient.age", patient.age, "years", []),
            ("patient.sex", patient.sex, None, []),
            ("request.service", request.service or None, None, []),
            ("request.codes", _codes_text(request.codes), None, request.codes),
            ("request.diagnoses", _codes_text(request.diagnoses), None, request.diagnoses),
            ("request.urgency", request.urgency, None, []),
        ]
        return [
            Fact(field=name, value=value, unit=unit, codes=codes)
            for name, value, unit, codes in candidates
            if value not in (None, "")
        ]

    @property
    def reference_date(self) -> dt.date:
        """`as_of`, or today when the bundle does not say."""
        return self.as_of or dt.date.today()


def _codes_text(codes: list[Code]) -> str | None:
    """`CPT 43775; ICD-10-CM E11.9 Type 2 diabetes mellitus`, or None without codes."""
    parts = [" ".join(filter(None, (c.system, c.code, c.display))) for c in codes]
    return "; ".join(parts) or None
