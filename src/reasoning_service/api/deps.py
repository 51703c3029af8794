"""FastAPI dependencies as typed aliases; routes read the one `Services` object on app.state."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from reasoning_service.service.container import Services


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]
