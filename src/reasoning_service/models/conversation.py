"""A tool-using conversation as a flat list of role-tagged messages, and the records of LLM calls.

Provider adapters translate these to and from the wire; nothing else knows a wire format.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reasoning_service.models.result import Usage


class _Contract(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)


class ToolCall(_Contract):
    """A tool call the model asked for. `arguments_json` is kept raw: it may not even parse."""

    id: str
    name: str
    arguments_json: str


class Message(_Contract):
    """One message of the conversation."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    """Only on assistant messages."""
    tool_call_id: str | None = None
    """Only on tool messages: the call this message answers."""
    is_error: bool = False
    """Only on tool messages: the call failed and the content says how to fix it."""


class ToolSpec(_Contract):
    """A tool offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""


class ToolChoice(StrEnum):
    AUTO = "auto"
    """The model may answer in text or call any tool."""
    REQUIRED = "required"
    """The model must call some tool."""


class LLMRequest(_Contract):
    """Everything an adapter needs for one call. `tool_choice` may also name a single tool."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | str = ToolChoice.AUTO
    max_output_tokens: int = 1024
    temperature: float = 0.0
    output_schema: dict[str, Any] | None = None
    """JSON schema the reply's text must match, for a request without tools. OpenAI-compatible
    adapters send it as `response_format`; llama.cpp turns it into a grammar, so a small model
    can only write a valid object (property order included)."""


class StopReason(StrEnum):
    END_TURN = "end_turn"
    TOOL_CALLS = "tool_calls"
    MAX_TOKENS = "max_tokens"
    REFUSAL = "refusal"
    OTHER = "other"


class LLMReply(_Contract):
    """A provider's answer, normalised."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: StopReason = StopReason.END_TURN
    usage: Usage = Field(default_factory=Usage)
    """Tokens of this one call; `llm_calls` is 1."""
    model: str = ""
    """The model the provider says answered."""


class LLMInteraction(BaseModel):
    """The record of one LLM call: what was sent, what came back, and what it cost."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    provider: str
    model: str
    request_messages: list[Message]
    reply: LLMReply | None = None
    """None when the call failed."""
    success: bool
    error_kind: Literal["transient", "permanent"] | None = None
    error_message: str | None = None
    attempt: int = 1
    """1 for the first try; retries count up."""
    duration_ms: float
    started_at: dt.datetime
