"""An evaluation as FHIR R4: a PAS-shaped `ClaimResponse` and a `QuestionnaireResponse`.

`GET /v1/evaluations/{id}?format=fhir` returns both in a `collection` Bundle:

- `ClaimResponse` (use `preauthorization`): `outcome` `complete` with the X12 306 review action
  `A1` (certified in total) when the recommendation is approve, else `queued` with `A4`
  (pended) — never `A3` (not certified): a denial is a human's decision. One `processNote` per
  open criterion says what documentation to request.
- `QuestionnaireResponse`: one item per criterion (answer: its status) with one nested item per
  atom (answer: its state); every answer carries its evidence as `EVIDENCE_EXTENSION`
  (a reference to the `DocumentReference` with the quote as display, or the fact's field).

Both are validated with the `fhir.resources` R4B models before they are returned.
"""

from __future__ import annotations

from typing import Any

from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.claimresponse import ClaimResponse
from fhir.resources.R4B.questionnaireresponse import QuestionnaireResponse

from reasoning_service.models import CaseEvidence, EvaluationResult, Recommendation

__all__ = [
    "EVIDENCE_EXTENSION",
    "REVIEW_ACTION_EXTENSION",
    "claim_response",
    "evaluation_bundle",
    "questionnaire_response",
]

REVIEW_ACTION_EXTENSION = (
    "http://hl7.org/fhir/us/davinci-pas/StructureDefinition/extension-reviewAction"
)
_REVIEW_ACTION_SYSTEM = "https://codesystem.x12.org/005010/306"
EVIDENCE_EXTENSION = "urn:reasoning-service:fhir:extension:evidence"
_EVALUATION_SYSTEM = "urn:reasoning-service:evaluation"
_STATUS_SYSTEM = "urn:reasoning-service:criterion-status"
_ATOM_STATE_SYSTEM = "urn:reasoning-service:atom-state"


def evaluation_bundle(result: EvaluationResult) -> dict[str, Any]:
    """The ClaimResponse and the QuestionnaireResponse of one evaluation, as a Bundle."""
    bundle = Bundle.model_validate(
        {
            "resourceType": "Bundle",
            "type": "collection",
            "timestamp": result.created_at.isoformat(),
            "entry": [
                {"resource": claim_response(result)},
                {"resource": questionnaire_response(result)},
            ],
        }
    )
    return bundle.model_dump(mode="json", exclude_none=True)


def claim_response(result: EvaluationResult) -> dict[str, Any]:
    """The PAS-shaped ClaimResponse: approved or pended, with a note per open criterion."""
    approved = result.recommendation is Recommendation.APPROVE
    action = ("A1", "Certified in total") if approved else ("A4", "Pended")
    notes = [
        {
            "number": number,
            "type": "display",
            "text": f"{open_.criterion_id} ({open_.status.value}): "
            + (open_.documentation_to_request or f"documentation showing: {open_.text}"),
        }
        for number, open_ in enumerate(result.open_criteria, start=1)
    ]
    resource = {
        "resourceType": "ClaimResponse",
        "id": _fhir_id(result.evaluation_id),
        "identifier": [
            {"system": "urn:reasoning-service:evaluation", "value": result.evaluation_id}
        ],
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
        "patient": {"display": f"Patient of case {result.case_id}"},
        "created": result.created_at.isoformat(),
        "insurer": {"display": "Payer"},
        "request": {"display": f"Claim of case {result.case_id}"},
        "outcome": "complete" if approved else "queued",
        "disposition": result.summary[:1000] or result.recommendation.value,
        "item": [
            {
                "itemSequence": 1,
                "adjudication": [
                    {
                        "category": {
                            "coding": [
                                {
                                    "system": "http://terminology.hl7.org/CodeSystem/adjudication",
                                    "code": "submitted",
                                }
                            ]
                        },
                        "extension": [
                            {
                                "url": REVIEW_ACTION_EXTENSION,
                                "extension": [
                                    {
                                        "url": "code",
                                        "valueCodeableConcept": {
                                            "coding": [
                                                {
                                                    "system": _REVIEW_ACTION_SYSTEM,
                                                    "code": action[0],
                                                    "display": action[1],
                                                }
                                            ]
                                        },
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ],
    }
    if notes:
        resource["processNote"] = notes
    return ClaimResponse.model_validate(resource).model_dump(mode="json", exclude_none=True)


def questionnaire_response(result: EvaluationResult) -> dict[str, Any]:
    """One item per criterion (its status) with a nested item per atom (its state)."""
    items = []
    for criterion in result.results:
        atoms = [
            {
                "linkId": f"{criterion.criterion_id}/{atom.atom_id}",
                "text": atom.label,
                "answer": [_answer(_ATOM_STATE_SYSTEM, atom.state.value, atom.evidence, atom.note)],
            }
            for atom in criterion.atoms
        ]
        item: dict[str, Any] = {
            "linkId": criterion.criterion_id,
            "text": criterion.rationale[:1000] or criterion.criterion_id,
            "answer": [
                _answer(_STATUS_SYSTEM, criterion.status.value, criterion.case_evidence, None)
            ],
        }
        if atoms:
            item["item"] = atoms
        items.append(item)
    policy = result.policy
    resource = {
        "resourceType": "QuestionnaireResponse",
        "id": _fhir_id(f"{result.evaluation_id}-qr"),
        "questionnaire": f"urn:reasoning-service:policy:{policy.policy_id}|{policy.version}",
        "status": "completed",
        "subject": {"display": f"Patient of case {result.case_id}"},
        "authored": result.created_at.isoformat(),
        "item": items,
    }
    return QuestionnaireResponse.model_validate(resource).model_dump(mode="json", exclude_none=True)


def _answer(
    system: str, code: str, evidence: list[CaseEvidence], note: str | None
) -> dict[str, Any]:
    answer: dict[str, Any] = {"valueCoding": {"system": system, "code": code}}
    if note:
        answer["valueCoding"]["display"] = note[:500]
    extensions = [_evidence_extension(item) for item in evidence]
    if extensions:
        answer["extension"] = extensions
    return answer


def _evidence_extension(evidence: CaseEvidence) -> dict[str, Any]:
    """A document quote as a reference to its DocumentReference; a fact by its field."""
    if evidence.doc_id:
        page = f" (page {evidence.page})" if evidence.page else ""
        return {
            "url": EVIDENCE_EXTENSION,
            "valueReference": {
                "reference": f"DocumentReference/{_fhir_id(evidence.doc_id)}",
                "display": f"{evidence.quote[:400]}{page}",
            },
        }
    return {"url": EVIDENCE_EXTENSION, "valueString": f"{evidence.field}: {evidence.quote[:400]}"}


def _fhir_id(value: str) -> str:
    """A FHIR id ([A-Za-z0-9-.]{1,64}) made from any string."""
    cleaned = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in value)
    return cleaned[:64] or "x"
