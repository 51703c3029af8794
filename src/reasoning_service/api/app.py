"""The FastAPI application factory: `uvicorn --factory reasoning_service.api.app:create_app`."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from reasoning_service import __version__
from reasoning_service.api.auth import AUTH_RESPONSES, require_caller
from reasoning_service.api.errors import (
    ERROR_RESPONSES,
    UnexpectedErrorMiddleware,
    install_error_handlers,
)
from reasoning_service.api.idempotency import IdempotencyLocks
from reasoning_service.api.limits import BodyLimitMiddleware
from reasoning_service.api.routes import (
    admin,
    evaluations,
    health,
    jobs,
    metrics,
    policies,
    review,
    shadow,
)
from reasoning_service.logging_setup import RequestIdMiddleware, SecretMask, configure_logging
from reasoning_service.service.container import build_services
from reasoning_service.settings import Settings
from reasoning_service.store import Store


def create_app(settings: Settings | None = None, *, store: Store | None = None) -> FastAPI:
    """Build the app; the lifespan builds whatever was not passed in and closes it on exit."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(
            settings.log_level,
            log_format=settings.log_format,
            mask=SecretMask(settings.secret_values()),
        )
        if settings.auth == "off":
            logging.getLogger(__name__).warning(
                "authentication is OFF (REASONING_AUTH=off): every caller is an admin",
                extra={"auth": "off"},
            )
        services = await build_services(settings, store=store)
        app.state.services = services
        try:
            yield
        finally:
            await services.aclose()

    app = FastAPI(
        title="Policy-verification reasoning service",
        version=__version__,
        lifespan=lifespan,
    )
    app.state.idempotency_locks = IdempotencyLocks()
    link_secret = settings.review_link_secret
    app.state.review_link_secret = (
        link_secret.get_secret_value().encode() if link_secret else secrets.token_bytes(32)
    )
    install_error_handlers(app)
    # The last added runs first: request id, then the catch-all, then the body limit.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(UnexpectedErrorMiddleware)
    app.add_middleware(RequestIdMiddleware)
    app.include_router(health.router)
    app.include_router(metrics.router)
    # Every /v1 route needs a key (REASONING_AUTH=off lets everyone in); errors are documented.
    guarded = {
        "dependencies": [Depends(require_caller)],
        "responses": {**ERROR_RESPONSES, **AUTH_RESPONSES},
    }
    app.include_router(policies.router, **guarded)
    app.include_router(evaluations.router, **guarded)
    app.include_router(jobs.router, **guarded)
    app.include_router(shadow.router, **guarded)
    app.include_router(admin.router, **guarded)
    # The reviewer's page: an API key as a bearer header, or a signed link (api/review_links.py).
    app.include_router(review.router, responses={**ERROR_RESPONSES, **AUTH_RESPONSES})
    return app
