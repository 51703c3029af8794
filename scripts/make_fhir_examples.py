"""Write the bundled FHIR examples (examples/fhir/) from bundled case bundles.

    python scripts/make_fhir_examples.py        # rewrites examples/fhir/*.bundle.json

Each case bundle becomes a Da Vinci PAS-style FHIR R4 Bundle: a `Claim` (the request's codes,
diagnoses and priority), the `Patient` (a birth date that gives the case's age at `as_of`), one
`DocumentReference` per document, and one `Observation` or `Condition` per fact, linked to its
source document, with the quote, page and the extractor's confidence in the service's
case-source extension (docs/fhir.md). Documents listed as PDF are rendered with fpdf2, one PDF
page per document page; the others are text/plain with form feeds between pages.
`examples/fhir/manifest.json` names each bundle's equivalent case bundle and policy.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "examples" / "fhir"
SOURCE_EXTENSION = "urn:reasoning-service:fhir:extension:case-source"
SYSTEMS = {
    "HCPCS": "https://bluebutton.cms.gov/resources/codesystem/hcpcs",
    "CPT": "http://www.ama-assn.org/go/cpt",
    "ICD-10-CM": "http://hl7.org/fhir/sid/icd-10-cm",
    "LOINC": "http://loinc.org",
    "SNOMED CT": "http://snomed.info/sct",
}
UCUM = {"events/hour": "/h", "hours": "h", "years": "a", "kg/m2": "kg/m2", "kg": "kg", "%": "%"}
"""UCUM codes of the units the bundled cases use."""
EXAMPLES = [
    # (bundle file, case file, policy id, documents attached as PDF)
    ("cpap-example-001.bundle.json", "examples/cases/cpap-example-001.json", "NCD-240.4", ()),
    (
        "bar-tb-001-pdf.bundle.json",
        "examples/eval/cases/tuning/bar-tb-001.json",
        "NCD-100.1",
        ("surg-consult", "obmed-summary"),
    ),
]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = []
    for name, case_file, policy_id, pdf_docs in EXAMPLES:
        case = json.loads((ROOT / case_file).read_text(encoding="utf-8"))
        bundle = case_to_fhir(case, pdf_docs=set(pdf_docs))
        text = json.dumps(bundle, indent=1, ensure_ascii=False) + "\n"
        (OUT / name).write_text(text, encoding="utf-8")
        manifest.append({"file": name, "case": f"../../{case_file}", "policy_id": policy_id})
        print(f"wrote examples/fhir/{name}")
    about = (
        "FHIR R4 Bundles (Da Vinci PAS style) made from bundled case bundles by "
        "scripts/make_fhir_examples.py; `case` is the equivalent case bundle (relative to "
        "this folder), and both give the same statuses."
    )
    (OUT / "manifest.json").write_text(
        json.dumps({"about": about, "bundles": manifest}, indent=1) + "\n", encoding="utf-8"
    )


def case_to_fhir(case: dict, *, pdf_docs: set[str]) -> dict:
    """The FHIR Bundle equivalent to one case bundle (module docstring)."""
    as_of = dt.date.fromisoformat(case["as_of"])
    patient_id = "patient-1"
    entries: list[dict] = [
        _patient(patient_id, case.get("patient", {}), as_of),
        {"resourceType": "Organization", "id": "provider-1", "name": "Requesting provider"},
        {"resourceType": "Organization", "id": "payer-1", "name": "Payer"},
        {
            "resourceType": "Coverage",
            "id": "coverage-1",
            "status": "active",
            "beneficiary": {"reference": f"Patient/{patient_id}"},
            "payor": [{"reference": "Organization/payer-1"}],
        },
        _claim(case, patient_id),
    ]
    for document in case["documents"]:
        entries.append(_document(document, patient_id, pdf=document["doc_id"] in pdf_docs))
    for number, fact in enumerate(case["facts"], start=1):
        entries.append(_fact(fact, number, patient_id))
    return {
        "resourceType": "Bundle",
        "id": f"pas-{case['case_id']}",
        "type": "collection",
        "timestamp": f"{case['as_of']}T09:00:00Z",
        "entry": [
            {"fullUrl": f"urn:example:{r['resourceType']}/{r['id']}", "resource": r}
            for r in entries
        ],
    }


def _patient(patient_id: str, patient: dict, as_of: dt.date) -> dict:
    resource: dict = {"resourceType": "Patient", "id": patient_id}
    if patient.get("age") is not None:
        resource["birthDate"] = f"{as_of.year - patient['age']}-01-01"
    if patient.get("sex"):
        resource["gender"] = {"M": "male", "F": "female"}.get(patient["sex"], "unknown")
    return resource


def _claim(case: dict, patient_id: str) -> dict:
    request = case.get("request", {})
    coding = [_coding(code) for code in request.get("codes", [])]
    claim = {
        "resourceType": "Claim",
        "id": case["case_id"],
        "status": "active",
        "type": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/claim-type",
                    "code": "professional",
                }
            ]
        },
        "use": "preauthorization",
        "patient": {"reference": f"Patient/{patient_id}"},
        "created": f"{case['as_of']}T09:00:00Z",
        "provider": {"reference": "Organization/provider-1"},
        "priority": {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/processpriority",
                    "code": "stat" if request.get("urgency") == "urgent" else "normal",
                }
            ]
        },
        "insurance": [
            {"sequence": 1, "focal": True, "coverage": {"reference": "Coverage/coverage-1"}}
        ],
        "diagnosis": [
            {"sequence": n, "diagnosisCodeableConcept": {"coding": [_coding(code)]}}
            for n, code in enumerate(request.get("diagnoses", []), start=1)
        ],
        "item": [
            {
                "sequence": 1,
                "productOrService": {"coding": coding, "text": request.get("service", "")},
            }
        ],
    }
    return claim


def _coding(code: dict) -> dict:
    coding = {"system": SYSTEMS.get(code["system"], code["system"]), "code": code["code"]}
    if code.get("display"):
        coding["display"] = code["display"]
    return coding


def _document(document: dict, patient_id: str, *, pdf: bool) -> dict:
    if pdf:
        attachment = {"contentType": "application/pdf", "data": _pdf(document["pages"])}
    else:
        text = "\f".join(document["pages"]).encode("utf-8")
        attachment = {"contentType": "text/plain", "data": base64.b64encode(text).decode()}
    attachment["title"] = document.get("title", "")
    resource = {
        "resourceType": "DocumentReference",
        "id": document["doc_id"],
        "status": "current",
        "type": {"text": document.get("title", "")},
        "subject": {"reference": f"Patient/{patient_id}"},
        "description": document.get("title", ""),
        "content": [{"attachment": attachment}],
    }
    if document.get("date"):
        resource["date"] = f"{document['date']}T00:00:00Z"
    return resource


def _pdf(pages: list[str]) -> str:
    from fpdf import FPDF

    pdf = FPDF(orientation="landscape", format="A4")
    pdf.set_creation_date(dt.datetime(2026, 1, 1, tzinfo=dt.UTC))  # reproducible bytes
    pdf.set_auto_page_break(auto=False)
    pdf.set_font("Helvetica", size=8)
    for page in pages:
        pdf.add_page()
        for line in page.split("\n"):
            # One PDF text line per source line, so the extracted text keeps the line breaks.
            pdf.cell(0, 4.5, line, new_x="LMARGIN", new_y="NEXT")
    return base64.b64encode(bytes(pdf.output())).decode()


def _fact(fact: dict, number: int, patient_id: str) -> dict:
    name = re.sub(r"[._]+", " ", fact["field"]).strip()
    value = fact.get("value")
    resource: dict = {"id": f"fact-{number}", "subject": {"reference": f"Patient/{patient_id}"}}
    source = fact.get("source")
    extension = [{"url": "confidence", "valueDecimal": fact.get("confidence", 1.0)}]
    if source:
        extension.append({"url": "quote", "valueString": source.get("quote", "")})
        if source.get("page"):
            extension.append({"url": "page", "valuePositiveInt": source["page"]})
    resource["extension"] = [{"url": SOURCE_EXTENSION, "extension": extension}]
    reference = [{"reference": f"DocumentReference/{source['doc_id']}"}] if source else []
    if isinstance(value, bool):
        resource |= {
            "resourceType": "Condition",
            "code": {"text": name},
            "verificationStatus": {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/condition-ver-status",
                        "code": "confirmed" if value else "refuted",
                    }
                ]
            },
        }
        if reference:
            resource["evidence"] = [{"detail": reference}]
        return resource
    resource |= {"resourceType": "Observation", "status": "final", "code": {"text": name}}
    if reference:
        resource["derivedFrom"] = reference
    if isinstance(value, int | float):
        quantity: dict = {"value": value}
        if fact.get("unit"):
            quantity["unit"] = fact["unit"]
            if fact["unit"] in UCUM:
                quantity |= {"system": "http://unitsofmeasure.org", "code": UCUM[fact["unit"]]}
        resource["valueQuantity"] = quantity
    elif isinstance(value, list):
        resource["valueString"] = ", ".join(map(str, value))
    elif isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        resource["valueDateTime"] = value
    else:
        resource["valueString"] = str(value)
    return resource


if __name__ == "__main__":
    main()
