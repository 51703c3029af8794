"""Policies: upload (admin keys; Markdown, PDF as base64, PageIndex JSON) with an optional
criteria set, list, read. A stored version never changes (`service/policies.py`)."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from reasoning_service.api.audit import audited
from reasoning_service.api.auth import CallerDep
from reasoning_service.api.deps import ServicesDep
from reasoning_service.models import Policy, PolicySummary, PolicyUpload

router = APIRouter(prefix="/v1/policies", tags=["policies"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=PolicySummary,
    responses={200: {"model": PolicySummary, "description": "This exact version was stored."}},
)
async def create_policy(
    upload: PolicyUpload, response: Response, services: ServicesDep, caller: CallerDep
) -> PolicySummary:
    """Index and store a new policy version (admin keys only); returns id, version and sha256.

    The same id and version again with the same document and criteria returns the stored one
    (200); with another document or other criteria it is 409: upload a new version instead.
    """
    resource = f"{upload.policy_id}@{upload.version}"
    async with audited(services, caller, "policy.create", resource) as audit:
        caller.check_admin("uploading a policy")
        ingested = await services.policies.ingest(upload)
        audit.status_code = 201 if ingested.created else 200
        audit.outcome = "ok" if ingested.created else "unchanged"
    if not ingested.created:
        response.status_code = status.HTTP_200_OK
    return ingested.policy.summary()


@router.get("", response_model=list[PolicySummary])
async def list_policies(services: ServicesDep) -> list[PolicySummary]:
    return await services.store.list_policies()


@router.get("/{policy_id:path}", response_model=Policy)
async def get_policy(policy_id: str, services: ServicesDep, version: str | None = None) -> Policy:
    """The policy with its tree and criteria; latest version unless `version` is given."""
    return await services.policies.get(policy_id, version)
