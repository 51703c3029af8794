"""The FastAPI application factory: `uvicorn --factory reasoning_service.api.app:create_app`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from reasoning_service import __version__
from reasoning_service.api.errors import install_error_handlers
from reasoning_service.api.routes import evaluations, health, policies
from reasoning_service.services.container import build_services
from reasoning_service.settings import Settings
from reasoning_service.store import Store


def create_app(settings: Settings | None = None, *, store: Store | None = None) -> FastAPI:
    """Build the app; the lifespan builds whatever was not passed in and closes it on exit."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
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
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(policies.router)
    app.include_router(evaluations.router)
    return app
