"""LLM clients: one `LLMClient` Protocol, two adapters, wrappers for retries, records, text ReAct.

Import adapters from their modules (`reasoning_service.llm.openai`, `.anthropic`); the names below
are what the rest of the service needs.
"""

from reasoning_service.llm.base import LLMClient, current_attempt
from reasoning_service.llm.classify import ErrorFacts, classify, parse_retry_after
from reasoning_service.llm.factory import build_llm_client
from reasoning_service.llm.recording import InteractionSink, RecordingLLMClient
from reasoning_service.llm.retry import RetryingLLMClient, backoff_s
from reasoning_service.llm.text_react import (
    ReActKind,
    ReActParse,
    TextReActClient,
    parse_react_text,
)

__all__ = [
    "ErrorFacts",
    "InteractionSink",
    "LLMClient",
    "ReActKind",
    "ReActParse",
    "RecordingLLMClient",
    "RetryingLLMClient",
    "TextReActClient",
    "backoff_s",
    "build_llm_client",
    "classify",
    "current_attempt",
    "parse_react_text",
    "parse_retry_after",
]
