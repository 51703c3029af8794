"""Text ReAct for models without native function calling, behind the same `LLMClient` interface.

Map:
- `parse_react_text(text) -> ReActParse`: the typed parser. It reads `Thought:` / `Action:` /
  `Action Input:` / `Final Answer:` sections (any case, optional markdown bold, thought optional),
  stops at the first `Observation:` (the model imagining a tool result), and reads the input as
  a JSON object (code fences and trailing text tolerated), else `key=value` pairs, else a bare
  string (`{"input": …}`).
- `to_text_request(request)`: the same conversation with no tools — the tool descriptions, their
  JSON schemas and the format rules appended to the system message, past tool calls rendered as
  `Thought/Action/Action Input` text, tool results as user messages `Observation: …`.
- `from_text_reply(reply, tools)`: an action becomes a `ToolCall` with a generated id, a
  `Final Answer` a call of `finish`, and anything malformed stays plain text, which the controller
  answers with its continuation prompt — so the ReAct controller runs unchanged in text mode.
- `TextReActClient(inner)`: the wrapper doing the three steps around `inner.complete`.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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

__all__ = [
    "FINISH_TOOL",
    "ReActKind",
    "ReActParse",
    "TextReActClient",
    "from_text_reply",
    "parse_react_text",
    "render_tool_instructions",
    "to_text_request",
]

FINISH_TOOL = "finish"
"""The tool a `Final Answer` stands for."""

_HEADER = re.compile(
    r"^[ \t]*[*_#>]*[ \t]*(thought|action[ _]input|action|observation|final[ _]answer)"
    r"[ \t]*[*_]*[ \t]*:[*_]*[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)
_KEY_VALUE = re.compile(
    r"""([A-Za-z_][\w.]*)\s*[=:]\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^,\n]+)"""
)
_TOOL_NAME = re.compile(r"[A-Za-z_][\w.\-]*")


class ReActKind(StrEnum):
    ACTION = "action"
    FINAL_ANSWER = "final_answer"
    MALFORMED = "malformed"


class ReActParse(BaseModel):
    """What one text reply says: call a tool, give the final answer, or neither."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    kind: ReActKind
    thought: str = ""
    action: str | None = None
    """Tool name, for ACTION."""
    action_input: dict[str, Any] = Field(default_factory=dict)
    """Tool arguments, for ACTION; a bare string arrives as `{"input": "…"}`."""
    final_answer: dict[str, Any] | None = None
    """The `finish` arguments, for FINAL_ANSWER."""
    reason: str = ""
    """Why the reply is MALFORMED."""


# --- parsing -------------------------------------------------------------------------------------


def parse_react_text(text: str) -> ReActParse:
    """Parse one model reply in the text ReAct format (see the module docstring)."""
    preamble, sections = _split_sections(text)
    action_at = _first(sections, "action")
    final_at = _first(sections, "final answer")
    if action_at is not None and (final_at is None or action_at < final_at):
        return _parse_action(preamble, sections, action_at)
    if final_at is not None:
        return _parse_final(preamble, sections, final_at)
    return ReActParse(
        kind=ReActKind.MALFORMED,
        thought=text.strip(),
        reason="no 'Action:' or 'Final Answer:' line found",
    )


def _split_sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """Preamble plus (label, body) pairs, cut at the first `Observation:`."""
    matches = list(_HEADER.finditer(text))
    preamble = text[: matches[0].start()] if matches else text
    sections: list[tuple[str, str]] = []
    for index, match in enumerate(matches):
        label = re.sub(r"[ _]+", " ", match.group(1).lower())
        if label == "observation":
            break
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        sections.append((label, text[match.end() : end].strip()))
    return preamble.strip(), sections


def _first(sections: Sequence[tuple[str, str]], label: str) -> int | None:
    return next((i for i, (name, _) in enumerate(sections) if name == label), None)


def _thought_before(preamble: str, sections: Sequence[tuple[str, str]], index: int) -> str:
    thoughts = [body for name, body in sections[:index] if name == "thought"]
    return thoughts[-1] if thoughts else preamble


def _parse_action(preamble: str, sections: Sequence[tuple[str, str]], action_at: int) -> ReActParse:
    thought = _thought_before(preamble, sections, action_at)
    action_line = sections[action_at][1]
    name_match = _TOOL_NAME.search(action_line.strip("`*'\" "))
    if name_match is None:
        return ReActParse(
            kind=ReActKind.MALFORMED, thought=thought, reason="'Action:' names no tool"
        )
    following = sections[action_at + 1 : action_at + 2]
    if following and following[0][0] == "action input":
        raw_input = following[0][1]
    else:  # `Action: tool {"a": 1}` or `Action: tool({"a": 1})`
        rest = action_line.strip("`*'\" ")[name_match.end() :].strip()
        raw_input = rest.removeprefix("(").removesuffix(")").strip()
    return ReActParse(
        kind=ReActKind.ACTION,
        thought=thought,
        action=name_match.group(0),
        action_input=parse_action_input(raw_input),
    )


def _parse_final(preamble: str, sections: Sequence[tuple[str, str]], final_at: int) -> ReActParse:
    thought = _thought_before(preamble, sections, final_at)
    answer = _parse_json_object(sections[final_at][1])
    if answer is None:
        return ReActParse(
            kind=ReActKind.MALFORMED,
            thought=thought,
            reason=f"'Final Answer:' must be one JSON object with the `{FINISH_TOOL}` arguments",
        )
    return ReActParse(kind=ReActKind.FINAL_ANSWER, thought=thought, final_answer=answer)


def parse_action_input(raw: str) -> dict[str, Any]:
    """A JSON object, else `key=value` pairs, else `{"input": raw}`; empty input is `{}`."""
    text = _strip_fences(raw).strip()
    if not text or text.lower() in ("none", "null", "{}"):
        return {}
    if (parsed := _parse_json_object(text)) is not None:
        return parsed
    if pairs := _parse_key_values(text):
        return pairs
    return {"input": _unquote(text)}


def _strip_fences(text: str) -> str:
    match = _FENCE.search(text)
    return match.group(1) if match else text


def _parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text`, ignoring fences and trailing prose; Python dicts too."""
    body = _strip_fences(text)
    start = body.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError:
        value = _parse_python_dict(body[start : body.rfind("}") + 1])
    return value if isinstance(value, dict) else None


def _parse_python_dict(text: str) -> object:
    """`{'a': 1, 'b': True}` — what models write when they think in Python."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _parse_key_values(text: str) -> dict[str, Any]:
    """`field=diagnosis.code, limit=3` or one pair per line; values JSON-decoded if they parse."""
    pairs = _KEY_VALUE.findall(text)
    if not pairs:
        return {}
    covered = sum(len(key) + len(value) for key, value in pairs)
    if covered < len(re.sub(r"[\s,=:]", "", text)) * 0.8:
        return {}  # mostly prose that happens to contain a colon: not pairs
    return {key: _decode_value(value.strip()) for key, value in pairs}


def _decode_value(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return _unquote(value)


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    return text


# --- rendering the conversation as text -----------------------------------------------------------


_FORMAT_RULES = """\
## How to answer

You cannot call tools natively. To use a tool, answer with exactly these lines and then stop:

Thought: what you need to find out and why
Action: the tool name, one of: {tool_names}
Action Input: the arguments as one JSON object on one line

The tool's result comes back to you as "Observation: ...". Never write an Observation yourself.
When you have enough evidence, answer with:

Thought: your final reasoning
Final Answer: one JSON object with the arguments of the `{finish}` tool"""


def render_tool_instructions(tools: Sequence[ToolSpec], tool_choice: ToolChoice | str) -> str:
    """The text appended to the system message: each tool, its schema, and the format rules."""
    lines = ["## Tools", ""]
    for tool in tools:
        lines += [
            f"### {tool.name}",
            tool.description,
            f"Arguments (JSON schema): {json.dumps(tool.parameters, sort_keys=True)}",
            "",
        ]
    names = ", ".join(tool.name for tool in tools if tool.name != FINISH_TOOL) or "(none)"
    lines.append(_FORMAT_RULES.format(tool_names=names, finish=FINISH_TOOL))
    if (rule := _choice_rule(tool_choice)) is not None:
        lines += ["", rule]
    return "\n".join(lines)


def _choice_rule(tool_choice: ToolChoice | str) -> str | None:
    if tool_choice == ToolChoice.AUTO:
        return None
    if tool_choice == ToolChoice.REQUIRED:
        return "Your next answer must be an Action or a Final Answer."
    if tool_choice == FINISH_TOOL:
        return "Your next answer must be your Final Answer."
    return f"Your next answer must be an Action of the tool `{tool_choice}`."


def render_action(call: ToolCall, thought: str = "") -> str:
    """A past tool call, written the way the model is asked to write one."""
    lines = [f"Thought: {thought.strip()}"] if thought.strip() else []
    lines += [f"Action: {call.name}", f"Action Input: {call.arguments_json}"]
    return "\n".join(lines)


def to_text_request(request: LLMRequest) -> LLMRequest:
    """The same request with tools described in the system message instead of offered natively."""
    if not request.tools:
        return request
    instructions = render_tool_instructions(request.tools, request.tool_choice)
    messages = [_to_text_message(message) for message in request.messages]
    if messages and messages[0].role == "system":
        system = messages[0].content + "\n\n" + instructions
        messages[0] = Message(role="system", content=system.strip())
    else:
        messages.insert(0, Message(role="system", content=instructions))
    return request.model_copy(
        update={"messages": tuple(_merge_same_role(messages)), "tools": (), "tool_choice": "auto"}
    )


def _to_text_message(message: Message) -> Message:
    if message.role == "assistant" and message.tool_calls:
        rendered = [render_action(message.tool_calls[0], message.content)]
        rendered += [render_action(call) for call in message.tool_calls[1:]]
        return Message(role="assistant", content="\n\n".join(rendered))
    if message.role == "tool":
        label = "Observation (error)" if message.is_error else "Observation"
        return Message(role="user", content=f"{label}: {message.content}")
    return message


def _merge_same_role(messages: Sequence[Message]) -> list[Message]:
    """Adjacent user (or assistant) messages joined: many chat templates insist on alternation."""
    merged: list[Message] = []
    for message in messages:
        if merged and merged[-1].role == message.role and message.role != "system":
            joined = merged[-1].content + "\n\n" + message.content
            merged[-1] = Message(role=message.role, content=joined)
        else:
            merged.append(message)
    return merged


# --- reading the reply back ---------------------------------------------------------------------


def _new_call_id() -> str:
    return f"react_{uuid.uuid4().hex[:12]}"


def from_text_reply(
    reply: LLMReply,
    tools: Sequence[ToolSpec] = (),
    *,
    new_call_id: Callable[[], str] = _new_call_id,
) -> LLMReply:
    """The text reply as a native-looking one: one tool call, or plain text when malformed."""
    parsed = parse_react_text(reply.content)
    if parsed.kind is ReActKind.MALFORMED:
        return reply
    if parsed.kind is ReActKind.FINAL_ANSWER:
        name, arguments = FINISH_TOOL, parsed.final_answer or {}
    else:
        name = parsed.action or ""
        arguments = _fit_bare_input(parsed.action_input, _spec_named(tools, name))
    call = ToolCall(id=new_call_id(), name=name, arguments_json=json.dumps(arguments))
    return reply.model_copy(
        update={
            "content": parsed.thought,
            "tool_calls": (call,),
            "stop_reason": StopReason.TOOL_CALLS,
        }
    )


def _spec_named(tools: Sequence[ToolSpec], name: str) -> ToolSpec | None:
    return next((tool for tool in tools if tool.name == name), None)


def _fit_bare_input(arguments: dict[str, Any], spec: ToolSpec | None) -> dict[str, Any]:
    """A bare string goes to the tool's only property, when it has exactly one."""
    if spec is None or set(arguments) != {"input"}:
        return arguments
    properties = list(spec.parameters.get("properties", {}))
    if len(properties) == 1 and properties[0] != "input":
        return {properties[0]: arguments["input"]}
    return arguments


class TextReActClient(WrapperLLM):
    """`LLMClient` wrapper that speaks text ReAct to a model without native tool calling."""

    def __init__(self, inner: LLMClient, *, new_call_id: Callable[[], str] = _new_call_id) -> None:
        super().__init__(inner)
        self._new_call_id = new_call_id

    async def complete(self, request: LLMRequest) -> LLMReply:
        reply = await self._inner.complete(to_text_request(request))
        if not request.tools:
            return reply
        return from_text_reply(reply, request.tools, new_call_id=self._new_call_id)
