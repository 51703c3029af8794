"""`ScriptedLLM`: an in-process `LLMClient` that replays a script, and builders for its steps.

```python
llm = ScriptedLLM([tool_call("facts_get", {"field": "age"}), finish(status="met")])
await controller.run(task)
assert llm.calls[1].request.messages[-1].role == "tool"
llm.assert_complete()
```

A step is an `LLMReply`, an exception to raise (e.g. `RateLimited(...)`), or a function of the
request returning a reply (sync or async) for replies that depend on the history. A reply whose
usage is empty gets a rough one (about 4 characters a token), so token budgets still bite.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from reasoning_service.models.conversation import (
    LLMReply,
    LLMRequest,
    StopReason,
    ToolCall,
)
from reasoning_service.models.result import Usage

__all__ = [
    "LLMCall",
    "ScriptedLLM",
    "Step",
    "UnconsumedLLMSteps",
    "UnexpectedLLMCall",
    "estimate_usage",
    "finish",
    "text",
    "tool_call",
    "tool_calls",
]

Step = (
    LLMReply
    | BaseException
    | Callable[[LLMRequest], LLMReply]
    | Callable[[LLMRequest], Awaitable[LLMReply]]
)


class UnexpectedLLMCall(AssertionError):
    """The code under test called the model more often than the script allows.

    An `AssertionError`, not an `LLMError`, so no fallback path can swallow it.
    """


class UnconsumedLLMSteps(AssertionError):
    """The script still had steps when the test ended."""


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One call the double received: its position and a deep copy of the request."""

    index: int
    request: LLMRequest


class ScriptedLLM:
    """`LLMClient` that answers from a script; see the module docstring."""

    __test__ = False

    def __init__(
        self, steps: Iterable[Step], *, provider: str = "scripted", model: str = "scripted-model"
    ) -> None:
        self._steps = list(steps)
        self._next = 0
        self._calls: list[LLMCall] = []
        self._provider = provider
        self._model = model
        self.closed = False

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model(self) -> str:
        return self._model

    @property
    def calls(self) -> tuple[LLMCall, ...]:
        """Every call so far, oldest first, as frozen snapshots."""
        return tuple(self._calls)

    @property
    def remaining(self) -> int:
        return len(self._steps) - self._next

    async def complete(self, request: LLMRequest) -> LLMReply:
        self._calls.append(LLMCall(index=len(self._calls), request=request.model_copy(deep=True)))
        if self._next >= len(self._steps):
            raise UnexpectedLLMCall(
                f"call #{len(self._calls)} but the script has only {len(self._steps)} steps; "
                f"last message: {request.messages[-1].role if request.messages else None}"
            )
        step = self._steps[self._next]
        self._next += 1
        if isinstance(step, BaseException):
            raise step
        reply = step if isinstance(step, LLMReply) else await _run_step(step, request)
        return (
            reply
            if reply.usage != Usage()
            else reply.model_copy(
                update={
                    "usage": estimate_usage(request, reply),
                    "model": reply.model or self._model,
                }
            )
        )

    async def aclose(self) -> None:
        self.closed = True

    def assert_complete(self) -> None:
        """Raise `UnconsumedLLMSteps` if the code under test stopped early."""
        if self.remaining:
            raise UnconsumedLLMSteps(
                f"{self.remaining} of {len(self._steps)} scripted steps were never used"
            )


async def _run_step(
    step: Callable[[LLMRequest], LLMReply] | Callable[[LLMRequest], Awaitable[LLMReply]],
    request: LLMRequest,
) -> LLMReply:
    result = step(request)
    return await result if inspect.isawaitable(result) else result


def estimate_usage(request: LLMRequest, reply: LLMReply) -> Usage:
    """Roughly 4 characters a token: enough for budget checks in tests and benchmarks."""
    sent = sum(
        len(m.content) + sum(len(c.arguments_json) for c in m.tool_calls) for m in request.messages
    )
    sent += sum(len(json.dumps(t.parameters)) + len(t.description) for t in request.tools)
    received = len(reply.content) + sum(
        len(c.arguments_json) + len(c.name) for c in reply.tool_calls
    )
    return Usage(input_tokens=sent // 4 + 1, output_tokens=received // 4 + 1, llm_calls=1)


# --- builders ----------------------------------------------------------------------------------


def tool_call(name: str, args: Mapping[str, Any] | str, id: str | None = None) -> LLMReply:
    """A reply calling one tool. A `str` for `args` is sent raw, e.g. to test invalid JSON."""
    arguments_json = args if isinstance(args, str) else json.dumps(_plain(args))
    call = ToolCall(
        id=id or f"call_{uuid.uuid4().hex[:10]}", name=name, arguments_json=arguments_json
    )
    return LLMReply(tool_calls=(call,), stop_reason=StopReason.TOOL_CALLS)


def tool_calls(*calls: LLMReply | ToolCall, content: str = "") -> LLMReply:
    """One reply with several (parallel) tool calls, from `tool_call()` replies or `ToolCall`s."""
    merged: list[ToolCall] = []
    for call in calls:
        merged.extend(call.tool_calls if isinstance(call, LLMReply) else (call,))
    return LLMReply(content=content, tool_calls=tuple(merged), stop_reason=StopReason.TOOL_CALLS)


def text(content: str) -> LLMReply:
    """A plain-text reply with no tool call (the controller should nudge toward `finish`)."""
    return LLMReply(content=content, stop_reason=StopReason.END_TURN)


def finish(
    status: str = "met",
    confidence: float = 0.9,
    rationale: str = "Scripted rationale.",
    policy_citations: Sequence[Mapping[str, Any] | BaseModel] = (),
    case_evidence: Sequence[Mapping[str, Any] | BaseModel] = (),
    *,
    id: str | None = None,
    **extra: Any,
) -> LLMReply:
    """A call of the `finish` tool with these arguments (citations as dicts or models)."""
    args = {
        "status": status,
        "confidence": confidence,
        "rationale": rationale,
        "policy_citations": [_plain(c) for c in policy_citations],
        "case_evidence": [_plain(e) for e in case_evidence],
        **extra,
    }
    return tool_call("finish", args, id=id)


def _plain(value: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    return dict(value)
