"""Test doubles that ship with the package: the eval harness, benchmarks and offline runs use them.

- `ScriptedLLM` (+ builders `tool_call`, `tool_calls`, `text`, `finish`): an in-process `LLMClient`.
- `ScriptedServer` / `ScriptedAPI`: a fake OpenAI + Anthropic HTTP API on 127.0.0.1 for the real
  SDK clients, with error, delay and overload injection.
"""

from reasoning_service.testing.scripted_llm import (
    LLMCall,
    ScriptedLLM,
    Step,
    UnconsumedLLMSteps,
    UnexpectedLLMCall,
    estimate_usage,
    finish,
    text,
    tool_call,
    tool_calls,
)
from reasoning_service.testing.scripted_server import (
    Delayed,
    ErrorInBody,
    HTTPError,
    RecordedRequest,
    Responder,
    ScriptedAPI,
    ScriptedServer,
    ServerStep,
    delayed,
    error_in_body,
    http_error,
    overloaded,
    rate_limited,
)

__all__ = [
    "Delayed",
    "ErrorInBody",
    "HTTPError",
    "LLMCall",
    "RecordedRequest",
    "Responder",
    "ScriptedAPI",
    "ScriptedLLM",
    "ScriptedServer",
    "ServerStep",
    "Step",
    "UnconsumedLLMSteps",
    "UnexpectedLLMCall",
    "delayed",
    "error_in_body",
    "estimate_usage",
    "finish",
    "http_error",
    "overloaded",
    "rate_limited",
    "text",
    "tool_call",
    "tool_calls",
]
