"""Property-based fuzzing of the whole API from its OpenAPI document (schemathesis, bounded).

Every operation gets positive (schema-valid) and negative (schema-violating) requests, with an
admin key; every response must be a non-5xx that matches the documented status codes, content
type and schema.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

schemathesis = pytest.importorskip("schemathesis")

import requests  # noqa: E402
from hypothesis import HealthCheck, Phase, given  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tests.reasoning_service.api.conftest import bearer  # noqa: E402

from reasoning_service.api.app import create_app  # noqa: E402
from reasoning_service.testing.live_server import LiveServer  # noqa: E402

EXAMPLES_PER_OPERATION = 25
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def fuzz(operation: Any, mode: GenerationMode, call: Any) -> int:
    """Run up to EXAMPLES_PER_OPERATION generated cases of one operation; returns how many."""
    tried = 0

    @hypothesis_settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        nonlocal tried
        tried += 1
        call(case)

    try:
        run()
    except Unsatisfiable:  # nothing to violate: an operation without parameters or body
        assert mode is GenerationMode.NEGATIVE and tried == 0
    return tried


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_operation_answers_5xx_or_off_schema(settings, admin_key, mode):
    app = create_app(settings)
    schema = schemathesis.openapi.from_dict(app.openapi())
    headers = bearer(admin_key)
    tried: dict[str, int] = {}
    with LiveServer(app) as server, requests.Session() as session:
        assert httpx.get(server.url + "/readyz").status_code == 200

        def call(case: Any) -> None:
            response = case.call(base_url=server.url, session=session, headers=headers, timeout=60)
            case.validate_response(response, checks=CHECKS, headers=headers)

        for result in schema.get_all_operations():
            operation = result.ok()
            label = f"{operation.method.upper()} {operation.path}"
            tried[label] = fuzz(operation, mode, call)
    assert len(tried) >= 7
    print(f"\nschemathesis {mode.value}: {sum(tried.values())} requests: {tried}")
