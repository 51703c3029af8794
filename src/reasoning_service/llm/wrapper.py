"""`WrapperLLM`: the one delegating base for `LLMClient` wrappers.

A wrapper adds behaviour around `inner.complete` (retries, records, metrics, a tool-calling
format) and keeps the rest: `provider` and `model` are the inner client's, `aclose` closes it.
Subclasses override `complete` only.
"""

from __future__ import annotations

from reasoning_service.llm.base import LLMClient
from reasoning_service.models.conversation import LLMReply, LLMRequest

__all__ = ["WrapperLLM"]


class WrapperLLM:
    """An `LLMClient` around another one; by itself it passes every call straight through."""

    def __init__(self, inner: LLMClient) -> None:
        self._inner = inner

    @property
    def inner(self) -> LLMClient:
        """The wrapped client."""
        return self._inner

    @property
    def provider(self) -> str:
        return self._inner.provider

    @property
    def model(self) -> str:
        return self._inner.model

    async def complete(self, request: LLMRequest) -> LLMReply:
        return await self._inner.complete(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
