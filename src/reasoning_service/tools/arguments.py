"""Tool-call arguments checked against a JSON schema, with messages that tell the model a fix.

A bad call is a value, not an exception (STYLE.md): every function here returns the arguments or
the text that goes back to the model in the tool result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator

from reasoning_service.models import ToolCall

__all__ = ["MAX_ARGUMENT_CHARS", "check_arguments", "validators_for"]

MAX_ARGUMENT_CHARS = 2000
"""String arguments are cut to this length (schemas carry no `maxLength`: see executor.py)."""

Precheck = Callable[[str, dict[str, Any]], str | None]
"""A rule the schema cannot say, run before the schema errors are reported."""


def validators_for(
    parameters: Mapping[str, dict[str, Any]],
) -> dict[str, Draft202012Validator]:
    """One compiled validator per tool name."""
    return {name: Draft202012Validator(schema) for name, schema in parameters.items()}


def check_arguments(
    call: ToolCall,
    parameters: Mapping[str, dict[str, Any]],
    validators: Mapping[str, Draft202012Validator],
    *,
    precheck: Precheck | None = None,
) -> dict[str, Any] | str:
    """The call's arguments (long strings cut), or an error message the model can act on."""
    if call.name not in validators:
        return (
            f"Unknown tool {call.name!r}. Available tools: {', '.join(parameters)}. "
            "Call one of them."
        )
    try:
        arguments = json.loads(call.arguments_json or "{}")
    except json.JSONDecodeError as exc:
        return f"Arguments of {call.name} are not valid JSON ({exc.msg}). Send a JSON object."
    if not isinstance(arguments, dict):
        return f"Arguments of {call.name} must be a JSON object."
    errors = sorted(validators[call.name].iter_errors(arguments), key=lambda e: list(e.path))
    if precheck is not None and (problem := precheck(call.name, arguments)) is not None:
        return problem
    if errors:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.path) or 'arguments'}: {e.message}" for e in errors[:3]
        )
        schema = json.dumps(parameters[call.name]["properties"])
        return f"Invalid arguments for {call.name}: {problems}. Expected properties: {schema}"
    return {key: _cut(value) for key, value in arguments.items()}


def _cut(value: Any) -> Any:
    return value[:MAX_ARGUMENT_CHARS] if isinstance(value, str) else value
