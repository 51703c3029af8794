"""FHIR R4 at the edges: a Da Vinci PAS-style Bundle in (`inbound`), ClaimResponse and
QuestionnaireResponse out (`outbound`). Validated with `fhir.resources` (its R4B models)."""

from reasoning_service.fhir.inbound import (
    SOURCE_EXTENSION,
    FhirLimits,
    case_from_fhir,
    is_fhir_bundle,
)

__all__ = ["SOURCE_EXTENSION", "FhirLimits", "case_from_fhir", "is_fhir_bundle"]
