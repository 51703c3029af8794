"""Forced tool calling for small models whose runtime only honours a *named* `tool_choice`.

llama.cpp's server constrains the output with a grammar when one function is named, which makes
even a 0.5B model emit valid JSON; with `auto` such models answer in prose. So the model is offered
one function, `act(thought, tool, args)`, whose `tool` is an enum of the real tools, and is always
forced to call it. Replies are translated back into the real tool calls, and past calls are shown
to the model as `act` calls again, so the conversation stays consistent and the ReAct controller
runs unchanged. When the controller itself names one tool (the last `finish`-only call), that tool
is forced directly.
"""

from __future__ import annotations

import json

from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.wrapper import WrapperLLM
from reasoning_service.models.conversation import (
    LLMReply,
    LLMRequest,
    Message,
    StopReason,
    ToolCall,
    ToolChoice,
    ToolSpec,
)

__all__ = ["ACT", "ForcedToolClient", "act_spec", "from_act_reply", "to_act_request"]

ACT = "act"


def act_spec(tools: tuple[ToolSpec, ...]) -> ToolSpec:
    """One function whose `tool` names the real tool and whose `args` are that tool's arguments."""
    catalogue = "; ".join(
        f"{t.name}: {t.description} args={json.dumps(t.parameters.get('properties', {}))}"
        for t in tools
    )
    return ToolSpec(
        name=ACT,
        description=f"Call one tool. Tools — {catalogue}",
        parameters={
            "type": "object",
            "properties": {
                "thought": {"type": "string"},
                "tool": {"type": "string", "enum": [t.name for t in tools]},
                # One of the real tools' schemas, so the runtime's grammar keeps args valid.
                "args": {"anyOf": [t.parameters for t in tools]},
            },
            "required": ["thought", "tool", "args"],
        },
    )


def to_act_request(request: LLMRequest) -> LLMRequest:
    """The request with `act` as the only, forced, function (or the one tool the caller named)."""
    if not request.tools:
        return request
    named = request.tool_choice not in (ToolChoice.AUTO, ToolChoice.REQUIRED)
    if named:
        return request.model_copy(update={"messages": _as_act_history(request.messages)})
    return request.model_copy(
        update={
            "messages": _as_act_history(request.messages),
            "tools": (act_spec(request.tools),),
            "tool_choice": ACT,
        }
    )


def from_act_reply(reply: LLMReply) -> LLMReply:
    """Turn `act` calls back into calls of the tools they name; keep the thought as content."""
    calls, thoughts = [], [reply.content] if reply.content else []
    for call in reply.tool_calls:
        if call.name != ACT:
            calls.append(call)
            continue
        try:
            arguments = json.loads(call.arguments_json)
            tool, args = str(arguments["tool"]), arguments.get("args", {})
            thoughts.append(str(arguments.get("thought", "")))
        except (json.JSONDecodeError, KeyError, TypeError):
            calls.append(call)  # the controller answers an unknown tool with how to fix it
            continue
        calls.append(ToolCall(id=call.id, name=tool, arguments_json=json.dumps(args)))
    return reply.model_copy(
        update={
            "tool_calls": tuple(calls),
            "content": "\n".join(t for t in thoughts if t),
            "stop_reason": StopReason.TOOL_CALLS if calls else reply.stop_reason,
        }
    )


def _as_act_history(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    return tuple(
        m.model_copy(update={"tool_calls": tuple(_as_act_call(c, m.content) for c in m.tool_calls)})
        if m.tool_calls
        else m
        for m in messages
    )


def _as_act_call(call: ToolCall, thought: str) -> ToolCall:
    try:
        args = json.loads(call.arguments_json or "{}")
    except json.JSONDecodeError:
        args = {}
    payload = {"thought": thought[:400], "tool": call.name, "args": args}
    return ToolCall(id=call.id, name=ACT, arguments_json=json.dumps(payload))


class ForcedToolClient(WrapperLLM):
    """`LLMClient` wrapper: every call with tools becomes a forced `act` call."""

    def __init__(self, inner: LLMClient) -> None:
        super().__init__(inner)

    async def complete(self, request: LLMRequest) -> LLMReply:
        reply = await self._inner.complete(to_act_request(request))
        return from_act_reply(reply) if request.tools else reply
