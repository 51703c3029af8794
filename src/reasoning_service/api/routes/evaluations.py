"""Evaluations: run one, read it back, read its trace."""

from __future__ import annotations

from fastapi import APIRouter, status
from pydantic import BaseModel

from reasoning_service.api.auth import CallerDep
from reasoning_service.api.deps import ServicesDep
from reasoning_service.errors import NotFoundError
from reasoning_service.models import EvaluationRequest, EvaluationResult, LLMInteraction, Message

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"])


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


@router.post("", status_code=status.HTTP_201_CREATED, response_model=EvaluationResult)
async def create_evaluation(
    request: EvaluationRequest, services: ServicesDep, caller: CallerDep
) -> EvaluationResult:
    """Evaluate a case bundle against a stored policy; the result is stored before it returns.

    Only so many evaluations run at once and few wait (service/admission.py): past that the
    answer is 503 with `Retry-After`, at once, rather than a queue that slows everyone down."""
    async with services.admission.slot():
        return await services.evaluations.evaluate(request, owner=caller.key_id)


@router.get("/{evaluation_id}", response_model=EvaluationResult)
async def get_evaluation(
    evaluation_id: str, services: ServicesDep, caller: CallerDep
) -> EvaluationResult:
    stored = await services.store.get_evaluation(evaluation_id)
    if stored is None:
        raise NotFoundError(f"evaluation {evaluation_id!r} is not known")
    caller.check_can_read(stored.owner, f"evaluation {evaluation_id!r}")
    return stored.result


@router.get("/{evaluation_id}/trace", response_model=TraceResponse)
async def get_trace(evaluation_id: str, services: ServicesDep, caller: CallerDep) -> TraceResponse:
    """Per criterion: the messages exchanged with the LLM and every LLM call made."""
    stored = await services.store.get_evaluation(evaluation_id)
    if stored is None:
        raise NotFoundError(f"evaluation {evaluation_id!r} is not known")
    caller.check_can_read(stored.owner, f"evaluation {evaluation_id!r}")
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
