"""The log allow-list: what the code logs as `extra` reaches the JSON line; nothing else does."""

from __future__ import annotations

import ast
import json
import logging
from pathlib import Path

import pytest

from reasoning_service.logging_setup import ALLOWED_FIELDS, JsonFormatter

SRC = Path(__file__).resolve().parents[2] / "src"


def _format(**extra: object) -> dict:
    record = logging.LogRecord("t", logging.WARNING, __file__, 1, "message", None, None)
    record.__dict__.update(extra)
    return json.loads(JsonFormatter().format(record))


@pytest.mark.parametrize(
    ("field", "value"), [("error_kind", "rate_limited"), ("policy_id", "NCD-240.4")]
)
def test_fields_the_code_logs_are_kept(field, value):
    assert _format(**{field: value})[field] == value


def test_fields_outside_the_allow_list_are_dropped():
    entry = _format(case_text="Patient reports chest pain", policy_id="NCD-240.4")
    assert "case_text" not in entry
    assert entry["policy_id"] == "NCD-240.4"


def _logged_extra_keys() -> set[str]:
    keys: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                        keys |= {k.value for k in keyword.value.keys if isinstance(k, ast.Constant)}
    return keys


def test_every_extra_field_in_the_source_is_allowed():
    """A field missing from the allow-list is silently dropped from every log line."""
    keys = _logged_extra_keys()
    assert {"error_kind", "policy_id"} <= keys
    assert keys <= ALLOWED_FIELDS, sorted(keys - ALLOWED_FIELDS)
