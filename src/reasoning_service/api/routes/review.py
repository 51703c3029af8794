"""The reviewer's page: `GET /review/{evaluation_id}` (HTML, api/review_page.py).

Auth is the API's: `Authorization: Bearer <key>` (the key must be able to read the
evaluation), or a short-lived signed link from `POST /v1/evaluations/{id}/review-link`
(`?expires=…&sig=…`, api/review_links.py). Either way an audit row is written.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from reasoning_service.api.audit import audited
from reasoning_service.api.auth import Caller, require_caller
from reasoning_service.api.deps import ServicesDep
from reasoning_service.api.review_links import check_review_link
from reasoning_service.api.review_page import render_review
from reasoning_service.errors import NotFoundError

router = APIRouter(tags=["review"])

_bearer = HTTPBearer(auto_error=False, description="An API key, or use a signed review link.")


@router.get(
    "/review/{evaluation_id}",
    # Not response_class=HTMLResponse: the error responses stay documented as JSON.
    response_model=None,
    responses={
        200: {
            "content": {"text/html": {"schema": {"type": "string"}}},
            "description": "The reviewer's page.",
        }
    },
)
async def review_page(
    evaluation_id: str,
    request: Request,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    expires: Annotated[int | None, Query(ge=0, le=2**40)] = None,
    sig: Annotated[str | None, Query(max_length=128)] = None,
) -> HTMLResponse:
    """The evaluation for a human reviewer: open criteria first, evidence marked in place."""
    if expires is not None or sig is not None:
        check_review_link(
            request.app.state.review_link_secret,
            evaluation_id,
            expires or 0,
            sig or "",
            now=dt.datetime.now(dt.UTC),
        )
        caller = Caller(key_id=None, admin=True)  # the link's signer could read it
    else:
        caller = await require_caller(request, services, credentials)
    async with audited(services, caller, "evaluation.review", evaluation_id):
        stored = await services.store.get_evaluation(evaluation_id)
        if stored is None:
            raise NotFoundError("evaluation_id: no evaluation has this id")
        caller.check_can_read(stored.owner, "this evaluation")
        case = await services.store.get_case(evaluation_id)
    trace_href = f"/v1/evaluations/{quote(evaluation_id, safe='')}/trace"
    html = render_review(stored.result, case, trace_href=trace_href)
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})
