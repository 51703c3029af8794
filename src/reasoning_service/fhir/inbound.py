"""A FHIR R4 Bundle (Da Vinci PAS/DTR style) as the service's case bundle.

What is read (docs/fhir.md has the table): `Patient` (age at `as_of`, sex), `Claim` (requested
items' codes and text, diagnoses, priority, `created` as `as_of`), `Observation`, `Condition`,
`Procedure` and `MedicationRequest` (one fact each, with their codes and a `FactProvenance`),
and `DocumentReference` attachments (base64 `text/plain` or `application/pdf`) as documents.
Other resource types are validated and otherwise ignored.

The bundle is validated with `fhir.resources` (R4B models, which read R4 for these resources)
after a structural pre-check, and every reference from a mapped resource to a subject, a source
document or a diagnosis must resolve inside the bundle. Any problem is an `InvalidInputError`
naming the entry, its resource type and the element — never a value, never a resource id (both
can be patient-linked).
"""

from __future__ import annotations

import datetime as dt
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fhir.resources.R4B import get_fhir_model_class
from fhir.resources.R4B.bundle import Bundle
from pydantic import ValidationError

from reasoning_service.errors import InvalidInputError
from reasoning_service.models import (
    CaseBundle,
    Code,
    Document,
    Fact,
    FactProvenance,
    FactSource,
    Patient,
    ServiceRequest,
    code_system_name,
)

__all__ = ["SOURCE_EXTENSION", "FhirLimits", "case_from_fhir", "is_fhir_bundle"]

SOURCE_EXTENSION = "urn:reasoning-service:fhir:extension:case-source"
"""Extension on an Observation, Condition, Procedure or MedicationRequest with the verbatim
`quote` (valueString) of its source document, the `page` (valuePositiveInt) it is on and the
extractor's `confidence` (valueDecimal, 0..1); the document itself is `derivedFrom`
(Observation) or `evidence.detail` (Condition). Without it a fact's confidence is 1."""
PAGE_BREAK = "\f"
"""Pages of a text/plain attachment are separated by form feeds."""

_MAPPED = ("Observation", "Condition", "Procedure", "MedicationRequest")
_REFERENCE_ELEMENTS = (
    "subject",
    "patient",
    "derivedFrom",
    "evidence",
    "supportingInfo",
    "diagnosis",
)
_ERROR_WORDS = {
    "missing": "is required",
    "extra_forbidden": "is not an element of this resource",
    "date_from_datetime_parsing": "is not a valid date",
    "date_parsing": "is not a valid date",
    "date_type": "is not a valid date",
    "datetime_parsing": "is not a valid dateTime",
    "datetime_type": "is not a valid dateTime",
    "literal_error": "is not one of the allowed codes",
    "enum": "is not one of the allowed codes",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "string_type": "must be a string",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "decimal_type": "must be a number",
    "decimal_parsing": "must be a number",
    "float_parsing": "must be a number",
}
_PRIORITY = {"normal": "standard", "stat": "urgent", "deferred": "standard"}
_NOT_TRUE = {"refuted", "entered-in-error"}


@dataclass(frozen=True)
class FhirLimits:
    """Bounds on what a bundle may hold beyond the case limits (`api/limits.py`)."""

    max_entries: int = 2000
    max_attachment_bytes: int = 1_000_000
    """Decoded size of one attachment (REASONING_MAX_ATTACHMENT_BYTES)."""
    max_pdf_pages: int = 500


def is_fhir_bundle(raw: object) -> bool:
    """Whether a parsed JSON file is a FHIR resource rather than a case bundle."""
    return isinstance(raw, dict) and "resourceType" in raw


def case_from_fhir(raw: object, *, limits: FhirLimits | None = None) -> CaseBundle:
    """Map a FHIR R4 Bundle (parsed JSON) to a case bundle; raise InvalidInputError if invalid."""
    limits = limits or FhirLimits()
    _precheck(raw, limits)
    try:
        bundle = Bundle.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInputError(_validation_message(exc, raw)) from None
    except (KeyError, TypeError, ValueError):
        raise InvalidInputError("fhir_bundle: not a valid FHIR R4 Bundle") from None
    return _Mapper(bundle, limits).case()


# --- checking ------------------------------------------------------------------------------


def _precheck(raw: object, limits: FhirLimits) -> None:
    """What the models would report badly (or not at all): the shape and the resource types."""
    if not isinstance(raw, dict):
        raise InvalidInputError("fhir_bundle: must be a FHIR Bundle object")
    if raw.get("resourceType") != "Bundle":
        raise InvalidInputError("fhir_bundle.resourceType: must be 'Bundle'")
    entries = raw.get("entry", [])
    if not isinstance(entries, list):
        raise InvalidInputError("fhir_bundle.entry: must be a list")
    if len(entries) > limits.max_entries:
        raise InvalidInputError(
            f"fhir_bundle.entry: more than the limit of {limits.max_entries} entries"
        )
    for index, entry in enumerate(entries):
        resource = entry.get("resource") if isinstance(entry, dict) else None
        if not isinstance(resource, dict):
            raise InvalidInputError(f"fhir_bundle.entry[{index}].resource: is required")
        kind = resource.get("resourceType")
        if not isinstance(kind, str) or not _is_resource_type(kind):
            raise InvalidInputError(
                f"fhir_bundle.entry[{index}].resource.resourceType: not a FHIR R4 resource type"
            )


def _is_resource_type(kind: str) -> bool:
    if not re.fullmatch(r"[A-Z][A-Za-z]{1,63}", kind) or kind == "Bundle":
        return False
    try:
        get_fhir_model_class(kind)
    except (KeyError, ValueError, AttributeError):
        return False
    return True


def _validation_message(exc: ValidationError, raw: dict[str, Any]) -> str:
    """`fhir_bundle.entry[2] (Observation).effectiveDateTime: is not a valid dateTime; …`."""
    parts = []
    for error in exc.errors()[:5]:
        words = _ERROR_WORDS.get(error["type"], "is not valid")
        parts.append(f"{_element_path(error['loc'], raw)}: {words}")
    return "; ".join(parts)


def _element_path(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    path = "fhir_bundle"
    parts = list(loc)
    if len(parts) >= 3 and parts[0] == "entry" and parts[2] == "resource":
        index = parts[1]
        kind = raw["entry"][index]["resource"].get("resourceType", "?")
        path += f".entry[{index}] ({kind})"
        parts = parts[3:]
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "resource_type":
            path += ".resourceType"
        else:
            path += f".{part}"
    return path


# --- mapping -------------------------------------------------------------------------------


@dataclass
class _Entry:
    index: int
    kind: str
    resource: Any

    def where(self, element: str) -> str:
        return f"fhir_bundle.entry[{self.index}] ({self.kind}).{element}"


class _Mapper:
    def __init__(self, bundle: Bundle, limits: FhirLimits) -> None:
        self.limits = limits
        self.entries = [
            _Entry(index, entry.resource.get_resource_type(), entry.resource)
            for index, entry in enumerate(bundle.entry or [])
        ]
        self.by_reference: dict[str, _Entry] = {}
        for entry, raw_entry in zip(self.entries, bundle.entry or [], strict=True):
            if entry.resource.id:
                self.by_reference[f"{entry.kind}/{entry.resource.id}"] = entry
            if raw_entry.fullUrl:
                self.by_reference[raw_entry.fullUrl] = entry
        self.timestamp = bundle.timestamp

    def case(self) -> CaseBundle:
        patients = self._of("Patient")
        if not patients:
            raise InvalidInputError("fhir_bundle: has no Patient resource")
        if len(patients) > 1:
            raise InvalidInputError("fhir_bundle: has more than one Patient resource")
        for entry in self.entries:
            self._check_references(entry)
        claims = self._of("Claim")
        as_of = _date_of(claims[0].resource.created) if claims else None
        as_of = as_of or (self.timestamp.date() if self.timestamp else None)
        documents = [d for entry in self._of("DocumentReference") for d in self._documents(entry)]
        facts = [fact for kind in _MAPPED for e in self._of(kind) for fact in self._facts(e)]
        try:
            return CaseBundle(
                case_id=_case_id(claims, patients[0]),
                as_of=as_of,
                request=_request(claims[0]) if claims else ServiceRequest(),
                patient=_patient(patients[0], as_of or dt.date.today()),
                facts=facts,
                documents=documents,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InvalidInputError(f"fhir_bundle: {first['msg']}") from None

    def _of(self, kind: str) -> list[_Entry]:
        return [entry for entry in self.entries if entry.kind == kind]

    # references

    def _check_references(self, entry: _Entry) -> None:
        for element, reference in _references(entry.resource):
            if reference.startswith("#"):
                continue  # a contained resource
            if reference not in self.by_reference:
                raise InvalidInputError(
                    f"{entry.where(element)}: refers to a resource that is not in the bundle"
                )

    def _resolve(self, reference: Any) -> _Entry | None:
        target = getattr(reference, "reference", None)
        return self.by_reference.get(target) if target else None

    # documents

    def _documents(self, entry: _Entry) -> Iterator[Document]:
        resource = entry.resource
        title = resource.description or _text_of(resource.type) or "Clinical document"
        date = _date_of(resource.date)
        readable = [
            (n, c.attachment)
            for n, c in enumerate(resource.content or [])
            if c.attachment is not None and c.attachment.data is not None
        ]
        for n, attachment in readable:
            element = f"content[{n}].attachment"
            pages = self._pages(entry, element, attachment)
            if pages is None:
                continue
            doc_id = resource.id or f"document-{entry.index}"
            if len(readable) > 1:
                doc_id = f"{doc_id}#{n}"
            yield Document(doc_id=doc_id, title=attachment.title or title, date=date, pages=pages)

    def _pages(self, entry: _Entry, element: str, attachment: Any) -> list[str] | None:
        data: bytes = attachment.data
        if len(data) > self.limits.max_attachment_bytes:
            raise InvalidInputError(
                f"{entry.where(element)}.data: larger than the limit of "
                f"{self.limits.max_attachment_bytes} bytes (REASONING_MAX_ATTACHMENT_BYTES)"
            )
        content_type = (attachment.contentType or "").split(";")[0].strip().lower()
        if content_type in ("text/plain", "text/markdown", ""):
            try:
                return data.decode("utf-8").split(PAGE_BREAK)
            except UnicodeDecodeError:
                raise InvalidInputError(f"{entry.where(element)}.data: not UTF-8 text") from None
        if content_type == "application/pdf":
            return self._pdf_pages(entry, element, data)
        return None  # images and other formats carry no text to read

    def _pdf_pages(self, entry: _Entry, element: str, data: bytes) -> list[str]:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError

        try:
            reader = PdfReader(io.BytesIO(data))
            if len(reader.pages) > self.limits.max_pdf_pages:
                raise InvalidInputError(
                    f"{entry.where(element)}.data: more than {self.limits.max_pdf_pages} pages"
                )
            return [page.extract_text() or "" for page in reader.pages]
        except (PyPdfError, ValueError, KeyError, TypeError, OSError):
            raise InvalidInputError(f"{entry.where(element)}.data: not a readable PDF") from None

    # facts

    def _facts(self, entry: _Entry) -> list[Fact]:
        resource = entry.resource
        match entry.kind:
            case "Observation":
                return self._observation_facts(entry)
            case "Condition":
                name, concept = _name(resource.code), resource.code
                refuted = _code_of(resource.verificationStatus) in _NOT_TRUE
                facts = [self._fact(entry, f"condition.{name}", not refuted, concept, "code")]
                onset = _date_of(resource.onsetDateTime)
                if onset is not None and not refuted:
                    facts.append(
                        self._fact(entry, f"condition.{name}.onset", onset, concept, "onset")
                    )
                return facts
            case "Procedure":
                name, concept = _name(resource.code), resource.code
                done = resource.status not in ("not-done", "entered-in-error")
                performed = _date_of(resource.performedDateTime) if done else None
                value = performed if performed is not None else done
                return [self._fact(entry, f"procedure.{name}", value, concept, "status")]
            case "MedicationRequest":
                concept = resource.medicationCodeableConcept
                active = resource.status not in ("cancelled", "entered-in-error", "stopped")
                name = _name(concept)
                return [self._fact(entry, f"medication.{name}", active, concept, "status")]
        return []

    def _observation_facts(self, entry: _Entry) -> list[Fact]:
        resource = entry.resource
        name = f"observation.{_name(resource.code)}"
        found = _value_of(resource)
        facts = []
        if found is not None:
            value, unit, ucum, element = found
            facts.append(self._fact(entry, name, value, resource.code, element, unit, ucum))
        for n, component in enumerate(resource.component or []):
            part = _value_of(component)
            if part is not None:
                value, unit, ucum, element = part
                facts.append(
                    self._fact(
                        entry,
                        f"{name}.{_name(component.code)}",
                        value,
                        component.code,
                        f"component[{n}].{element}",
                        unit,
                        ucum,
                    )
                )
        if not facts and resource.dataAbsentReason is None:
            raise InvalidInputError(
                f"{entry.where('value[x]')}: is required (a value, components with values, "
                "or a dataAbsentReason)"
            )
        return facts

    def _fact(
        self,
        entry: _Entry,
        field: str,
        value: Any,
        concept: Any,
        element: str,
        unit: str | None = None,
        ucum: str | None = None,
    ) -> Fact:
        quote, page, confidence = _source_extension(entry.resource)
        return Fact(
            field=field,
            value=value,
            unit=unit,
            confidence=confidence,
            codes=_codes(concept),
            source=self._source(entry, quote, page),
            provenance=FactProvenance(
                resource_type=entry.kind,
                resource_id=entry.resource.id,
                element=element,
                ucum_unit=ucum,
            ),
        )

    def _source(self, entry: _Entry, quote: str, page: int | None) -> FactSource | None:
        resource = entry.resource
        targets = list(getattr(resource, "derivedFrom", None) or [])
        for evidence in getattr(resource, "evidence", None) or []:
            targets.extend(evidence.detail or [])
        document = next(
            (e for e in map(self._resolve, targets) if e and e.kind == "DocumentReference"), None
        )
        if document is None:
            return None
        return FactSource(
            doc_id=document.resource.id or f"document-{document.index}", page=page, quote=quote
        )


def _source_extension(resource: Any) -> tuple[str, int | None, float]:
    """(quote, page, confidence) from the `SOURCE_EXTENSION`, or ("", None, 1.0)."""
    quote, page, confidence = "", None, 1.0
    for extension in resource.extension or []:
        if extension.url != SOURCE_EXTENSION:
            continue
        for part in extension.extension or []:
            if part.url == "quote" and part.valueString:
                quote = part.valueString
            elif part.url == "page" and part.valuePositiveInt:
                page = int(part.valuePositiveInt)
            elif part.url == "confidence" and part.valueDecimal is not None:
                confidence = min(1.0, max(0.0, float(part.valueDecimal)))
    return quote, page, confidence


def _references(resource: Any) -> Iterator[tuple[str, str]]:
    """(element, reference) of the references that mapping follows or that name the patient."""
    for element in _REFERENCE_ELEMENTS:
        value = getattr(resource, element, None)
        items = value if isinstance(value, list) else [value] if value is not None else []
        for n, item in enumerate(items):
            where = f"{element}[{n}]" if isinstance(value, list) else element
            for name, reference in _reference_fields(item):
                yield (f"{where}.{name}" if name else where), reference


def _reference_fields(item: Any) -> Iterator[tuple[str, str]]:
    if getattr(item, "reference", None) and isinstance(item.reference, str):
        yield "", item.reference
        return
    for name in ("detail", "valueReference", "diagnosisReference"):
        value = getattr(item, name, None)
        values = value if isinstance(value, list) else [value] if value is not None else []
        for n, reference in enumerate(values):
            if getattr(reference, "reference", None):
                yield (f"{name}[{n}]" if isinstance(value, list) else name), reference.reference


def _value_of(item: Any) -> tuple[Any, str | None, str | None, str] | None:
    """(value, unit, UCUM code, element) of an Observation or component, or None."""
    quantity = item.valueQuantity
    if quantity is not None and quantity.value is not None:
        number = float(quantity.value)
        value = int(number) if number.is_integer() else number
        ucum = quantity.code if (quantity.system or "").endswith("unitsofmeasure.org") else None
        return value, quantity.unit or quantity.code, ucum, "valueQuantity"
    for element in ("valueString", "valueBoolean", "valueInteger"):
        value = getattr(item, element, None)
        if value is not None:
            return value, None, None, element
    if item.valueCodeableConcept is not None:
        return _text_of(item.valueCodeableConcept), None, None, "valueCodeableConcept"
    date = _date_of(getattr(item, "valueDateTime", None))
    if date is not None:
        return date, None, None, "valueDateTime"
    return None


def _request(claim: _Entry) -> ServiceRequest:
    resource = claim.resource
    codes, services = [], []
    for item in resource.item or []:
        codes.extend(_codes(item.productOrService))
        services.append(_text_of(item.productOrService))
    diagnoses = [
        code
        for diagnosis in resource.diagnosis or []
        for code in _codes(diagnosis.diagnosisCodeableConcept)
    ]
    priority = _code_of(resource.priority)
    return ServiceRequest(
        service="; ".join(s for s in services if s),
        codes=codes,
        diagnoses=diagnoses,
        urgency=_PRIORITY.get(priority, priority) if priority else None,
    )


def _patient(entry: _Entry, as_of: dt.date) -> Patient:
    resource = entry.resource
    age = None
    birth = _date_of(resource.birthDate)
    if birth is not None and birth <= as_of:
        age = as_of.year - birth.year - ((as_of.month, as_of.day) < (birth.month, birth.day))
    sex = {"male": "M", "female": "F"}.get(resource.gender or "", resource.gender)
    return Patient(age=age, sex=sex)


def _case_id(claims: list[_Entry], patient: _Entry) -> str:
    for entry in (*claims, patient):
        if entry.resource.id:
            return f"fhir-{entry.kind.lower()}-{entry.resource.id}"[:200]
    return "fhir-bundle"


def _codes(concept: Any) -> list[Code]:
    if concept is None:
        return []
    return [
        Code(system=code_system_name(c.system), code=c.code, display=c.display)
        for c in concept.coding or []
        if c.system and c.code
    ]


def _code_of(concept: Any) -> str | None:
    if concept is None:
        return None
    return next((c.code for c in concept.coding or [] if c.code), None)


def _text_of(concept: Any) -> str:
    if concept is None:
        return ""
    if concept.text:
        return concept.text
    return next((c.display or c.code or "" for c in concept.coding or []), "")


def _name(concept: Any) -> str:
    """A field name from a concept's text (`Hemoglobin A1c` -> `hemoglobin_a1c`)."""
    words = re.findall(r"[a-z0-9]+", _text_of(concept).lower())
    return "_".join(words)[:120] or "unnamed"


def _date_of(value: Any) -> dt.date | None:
    """A date from a FHIR date/dateTime (a partial `2026-03` date is not a day: None)."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}.*", value):
        try:
            return dt.date.fromisoformat(value[:10])
        except ValueError:
            return None
    return None
