"""Shared fixtures: paths to the bundled examples and test fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reasoning_service.models import CaseBundle

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def cpap_case() -> CaseBundle:
    return CaseBundle.model_validate_json((FIXTURES / "cpap-dev-001.json").read_text())


@pytest.fixture
def cpap_case_json() -> dict:
    return json.loads((FIXTURES / "cpap-dev-001.json").read_text())
