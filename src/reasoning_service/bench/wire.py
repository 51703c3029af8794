"""Shared by the LLM benchmarks: a recording agent and token accounting from what went on the wire.

Both sides of a comparison (the service and dspy.ReAct) are charged the same way, from the
requests the scripted server received and the replies it gave: ~4 characters a token, and the
cached part of a prompt is its prefix unchanged since the previous request (the scripted
server's own rule; requests are sent one at a time, so "previous" is the same agent's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reasoning_service.models import LLMReply
from reasoning_service.testing.scripted_agent import PolicyAgent

__all__ = ["GPT_4O_MINI_USD_PER_MTOK", "RecordingAgent", "WireUsage", "cost_usd"]

GPT_4O_MINI_USD_PER_MTOK = {"input": 0.15, "cached_input": 0.075, "output": 0.60}
"""Published gpt-4o-mini prices, USD per million tokens."""


def cost_usd(input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
    """Cost at gpt-4o-mini prices; `input_tokens` includes the cached ones."""
    prices = GPT_4O_MINI_USD_PER_MTOK
    return (
        (input_tokens - cached_tokens) * prices["input"]
        + cached_tokens * prices["cached_input"]
        + output_tokens * prices["output"]
    ) / 1_000_000


@dataclass
class WireUsage:
    """Calls and tokens charged for a stretch of requests."""

    llm_calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    request_chars: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "llm_calls": self.llm_calls,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(
                cost_usd(self.input_tokens, self.cached_input_tokens, self.output_tokens), 6
            ),
        }


class RecordingAgent:
    """`PolicyAgent` that also charges each exchange; `mark()`/`since(mark)` slice the tally."""

    def __init__(self) -> None:
        self._agent = PolicyAgent()
        self._previous = ""
        self.exchanges: list[tuple[int, int, int]] = []
        """(prompt tokens, cached tokens, completion tokens) per request, in order."""

    def __call__(self, body: dict[str, Any]) -> LLMReply:
        reply = self._agent(body)
        prompt = _serialise_prompt(body)
        cached = _common_prefix_length(self._previous, prompt)
        self._previous = prompt
        completion = len(reply.content) + sum(
            len(c.name) + len(c.arguments_json) for c in reply.tool_calls
        )
        self.exchanges.append((len(prompt) // 4 + 1, cached // 4, completion // 4 + 1))
        return reply

    def mark(self) -> int:
        return len(self.exchanges)

    def since(self, mark: int) -> WireUsage:
        usage = WireUsage()
        for prompt, cached, completion in self.exchanges[mark:]:
            usage.llm_calls += 1
            usage.input_tokens += prompt
            usage.cached_input_tokens += cached
            usage.output_tokens += completion
        return usage


def _serialise_prompt(body: dict[str, Any]) -> str:
    parts = [json.dumps(body.get("tools", []), sort_keys=True)]
    parts += [json.dumps(message, sort_keys=True) for message in body.get("messages", [])]
    return "\n".join(parts)


def _common_prefix_length(a: str, b: str) -> int:
    length = min(len(a), len(b))
    return next((i for i in range(length) if a[i] != b[i]), length)
