"""Policies: upload (Markdown, PDF as base64, PageIndex JSON) with an optional criteria set."""

from __future__ import annotations

from fastapi import APIRouter, status

from reasoning_service.api.deps import ServicesDep
from reasoning_service.models import Policy, PolicySummary, PolicyUpload

router = APIRouter(prefix="/v1/policies", tags=["policies"])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=PolicySummary)
async def create_policy(upload: PolicyUpload, services: ServicesDep) -> PolicySummary:
    """Index and store a policy; returns its id, version and sha256."""
    policy = await services.policies.ingest(upload)
    return policy.summary()


@router.get("", response_model=list[PolicySummary])
async def list_policies(services: ServicesDep) -> list[PolicySummary]:
    return await services.store.list_policies()


@router.get("/{policy_id:path}", response_model=Policy)
async def get_policy(policy_id: str, services: ServicesDep, version: str | None = None) -> Policy:
    """The policy with its tree and criteria; latest version unless `version` is given."""
    return await services.policies.get(policy_id, version)
