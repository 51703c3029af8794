"""Evaluations: run one (bounded, idempotent with `Idempotency-Key`), read it, read its trace.

The body of `POST /v1/evaluations` is a case bundle request (`{"case": …}`) or a FHIR one
(`{"fhir_bundle": …}`, docs/fhir.md); `GET /v1/evaluations/{id}?format=fhir` answers with a
ClaimResponse and a QuestionnaireResponse. `"mode": "async"` (or `Prefer: respond-async`)
queues the evaluation instead and answers 202 with a job to poll (`api/routes/jobs.py`); that
needs the PostgreSQL store. Each route writes an audit row (`api/audit.py`): key id, action,
evaluation id, outcome.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Query, Request, Response, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Discriminator, Tag

from reasoning_service.api.audit import audited
from reasoning_service.api.auth import CallerDep
from reasoning_service.api.deps import IdempotencyLocksDep, ServicesDep
from reasoning_service.api.errors import BODY_VARIANTS
from reasoning_service.api.idempotency import idempotency_of
from reasoning_service.api.limits import check_evaluation_limits
from reasoning_service.api.review_links import signed_review_path
from reasoning_service.api.routes.jobs import JobResponse, job_response
from reasoning_service.errors import InvalidInputError, NotFoundError
from reasoning_service.fhir import FhirLimits, case_from_fhir
from reasoning_service.fhir.outbound import evaluation_bundle
from reasoning_service.logging_setup import SecretMask
from reasoning_service.models import (
    EvaluationRequest,
    EvaluationResult,
    FhirEvaluationRequest,
    LLMInteraction,
    Message,
)
from reasoning_service.settings import Settings

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"])

FHIR_JSON = "application/fhir+json"


def _body_variant(body: Any) -> str:
    return (
        BODY_VARIANTS[1] if isinstance(body, dict) and "fhir_bundle" in body else BODY_VARIANTS[0]
    )


EvaluationBody = Annotated[
    Annotated[EvaluationRequest, Tag(BODY_VARIANTS[0])]
    | Annotated[FhirEvaluationRequest, Tag(BODY_VARIANTS[1])],
    Discriminator(_body_variant),
]
"""`{"case": …}` or `{"fhir_bundle": …}`: which one is told by the `fhir_bundle` key."""


class ReviewLinkResponse(BaseModel):
    """A short-lived link to the reviewer's page that needs no header (docs/fhir.md)."""

    path: str
    """`/review/{evaluation_id}?expires=…&sig=…`, relative to the service's base URL."""
    expires_at: dt.datetime


class CriterionTraceResponse(BaseModel):
    """The conversation and LLM calls behind one criterion result."""

    criterion_id: str
    messages: list[Message]
    interactions: list[LLMInteraction]


class TraceResponse(BaseModel):
    evaluation_id: str
    controller: str | None = None
    arm: str | None = None
    """Rollout arm (`control`, `candidate`) when routing splits."""
    criteria: list[CriterionTraceResponse]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=EvaluationResult,
    responses={
        200: {"model": EvaluationResult, "description": "A retry: the stored result."},
        202: {"model": JobResponse, "description": "Queued (`mode: async`): poll the job."},
    },
)
async def create_evaluation(
    body: Annotated[EvaluationBody, Body()],
    response: Response,
    http: Request,
    services: ServicesDep,
    caller: CallerDep,
    locks: IdempotencyLocksDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
    prefer: Annotated[str | None, Header(alias="Prefer")] = None,
) -> EvaluationResult | JSONResponse:
    """Evaluate a case bundle against a stored policy; the result is stored before it returns.

    With an `Idempotency-Key` header (per API key), a retry with the same body returns the
    stored result with 200 and `Idempotent-Replayed: true`; the same key with another body is
    422. Without one, every request is a new evaluation (201).

    Only so many evaluations run at once and few wait (service/admission.py): past that the
    answer is 503 with `Retry-After`, at once, rather than a queue that slows everyone down.

    With `"mode": "async"` or `Prefer: respond-async`: 202 with the job (its id, state and
    `status_url`), at once; a retry with the same `Idempotency-Key` gets the first job. 422 on
    a service whose store is SQLite.
    """
    if getattr(body, "mode", None) == "async" or _prefers_async(prefer):
        request = await _case_request(body, services.settings)
        return await _submit(request, http, services, caller, idempotency_key)
    async with audited(services, caller, "evaluation.create") as audit:
        audit.status_code = 201
        request = await _case_request(body, services.settings)
        check_evaluation_limits(request, services.settings)
        idempotency = idempotency_of(idempotency_key, caller.key_id, request)
        if idempotency is None:
            async with services.admission.slot():
                result = await services.evaluations.evaluate(request, owner=caller.key_id)
        else:
            async with locks.hold(idempotency.scope):
                earlier = await services.store.find_idempotent(idempotency.scope)
                if earlier is not None:
                    if earlier.request_sha256 != idempotency.request_sha256:
                        raise InvalidInputError(
                            "Idempotency-Key: already used with a different request body; "
                            "use a new key for a new request"
                        )
                    audit.resource = earlier.evaluation.result.evaluation_id
                    audit.outcome, audit.status_code = "replayed", 200
                    response.status_code = status.HTTP_200_OK
                    response.headers["Idempotent-Replayed"] = "true"
                    return earlier.evaluation.result
                async with services.admission.slot():
                    result = await services.evaluations.evaluate(
                        request, owner=caller.key_id, idempotency=idempotency
                    )
        audit.resource = result.evaluation_id
    # The stored copy is masked by the store; the reply gets the same mask.
    return _masked(result, SecretMask(services.settings.secret_values()))


async def _case_request(
    body: EvaluationRequest | FhirEvaluationRequest, settings: Settings
) -> EvaluationRequest:
    """The request with a case bundle: a FHIR bundle is validated and mapped (off the loop)."""
    if isinstance(body, EvaluationRequest):
        return body
    limits = FhirLimits(
        max_attachment_bytes=settings.max_attachment_bytes,
        max_pdf_pages=settings.max_pages_per_document,
    )
    case = await asyncio.to_thread(case_from_fhir, body.fhir_bundle, limits=limits)
    return EvaluationRequest(
        case=case,
        policy_id=body.policy_id,
        policy_version=body.policy_version,
        criterion_ids=body.criterion_ids,
    )


def _prefers_async(prefer: str | None) -> bool:
    """`Prefer: respond-async` (RFC 7240), among other preferences or alone."""
    if not prefer:
        return False
    return any(p.split(";")[0].strip().lower() == "respond-async" for p in prefer.split(","))


async def _submit(
    request: EvaluationRequest,
    http: Request,
    services: ServicesDep,
    caller: CallerDep,
    idempotency_key: str | None,
) -> JSONResponse:
    async with audited(services, caller, "job.create") as audit:
        audit.status_code = 202
        if services.jobs is None:
            raise InvalidInputError(
                "mode: asynchronous evaluations need the PostgreSQL store "
                "(REASONING_DATABASE_URL=postgresql://…) and a `reasoning-service worker`; "
                "this service stores in SQLite: send the request without `mode: async`"
            )
        check_evaluation_limits(request, services.settings)
        request = request.model_copy(update={"mode": "async"})
        idempotency = idempotency_of(idempotency_key, caller.key_id, request)
        job = await services.jobs.submit(request, owner=caller.key_id, idempotency=idempotency)
        audit.resource = job.job_id
        if job.replayed:
            audit.outcome = "replayed"
        body = job_response(job, http)
        headers = {"Location": body.status_url}
        if job.replayed:
            headers["Idempotent-Replayed"] = "true"
        return JSONResponse(
            status_code=status.HTTP_202_ACCEPTED,
            content=body.model_dump(mode="json"),
            headers=headers,
        )


def _masked(result: EvaluationResult, mask: SecretMask) -> EvaluationResult:
    if not mask:
        return result
    return EvaluationResult.model_validate_json(mask.text(result.model_dump_json()))


@router.get(
    "/{evaluation_id}",
    response_model=EvaluationResult,
    responses={
        200: {
            "content": {FHIR_JSON: {"schema": {"type": "object"}}},
            "description": "The evaluation; with `format=fhir` a FHIR Bundle holding a "
            "ClaimResponse and a QuestionnaireResponse.",
        }
    },
)
async def get_evaluation(
    evaluation_id: str,
    services: ServicesDep,
    caller: CallerDep,
    output: Annotated[Literal["json", "fhir"], Query(alias="format")] = "json",
) -> EvaluationResult | Response:
    """The stored evaluation: the service's JSON, or (`format=fhir`) FHIR R4 resources."""
    async with audited(services, caller, "evaluation.read", evaluation_id):
        stored = await services.store.get_evaluation(evaluation_id)
        if stored is None:
            raise NotFoundError("evaluation_id: no evaluation has this id")
        caller.check_can_read(stored.owner, "this evaluation")
    if output == "fhir":
        return JSONResponse(evaluation_bundle(stored.result), media_type=FHIR_JSON)
    return stored.result


@router.post("/{evaluation_id}/review-link", response_model=ReviewLinkResponse)
async def create_review_link(
    evaluation_id: str, request: Request, services: ServicesDep, caller: CallerDep
) -> ReviewLinkResponse:
    """A signed link to the reviewer's page, valid for `REASONING_REVIEW_LINK_TTL_S` seconds."""
    async with audited(services, caller, "evaluation.review_link", evaluation_id):
        stored = await services.store.get_evaluation(evaluation_id)
        if stored is None:
            raise NotFoundError("evaluation_id: no evaluation has this id")
        caller.check_can_read(stored.owner, "this evaluation")
    expires_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=services.settings.review_link_ttl_s)
    path = signed_review_path(request.app.state.review_link_secret, evaluation_id, expires_at)
    return ReviewLinkResponse(path=path, expires_at=expires_at)


@router.get("/{evaluation_id}/trace", response_model=TraceResponse)
async def get_trace(evaluation_id: str, services: ServicesDep, caller: CallerDep) -> TraceResponse:
    """Per criterion: the messages exchanged with the LLM and every LLM call made."""
    async with audited(services, caller, "evaluation.trace", evaluation_id):
        stored = await services.store.get_evaluation(evaluation_id)
        if stored is None:
            raise NotFoundError("evaluation_id: no evaluation has this id")
        caller.check_can_read(stored.owner, "this evaluation")
        traces = await services.store.get_traces(evaluation_id)
    return TraceResponse(
        evaluation_id=evaluation_id,
        controller=stored.result.controller,
        arm=stored.result.arm,
        criteria=[
            CriterionTraceResponse(
                criterion_id=r.criterion_id,
                messages=traces[r.criterion_id].messages if r.criterion_id in traces else [],
                interactions=traces[r.criterion_id].interactions
                if r.criterion_id in traces
                else [],
            )
            for r in stored.result.results
        ],
    )
