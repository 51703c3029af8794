"""The one seam between the service and a model: the `LLMClient` Protocol.

Adapters (`openai.py`, `anthropic.py`) translate an `LLMRequest` to the wire and back; wrappers
(`retry.py`, `recording.py`, `text_react.py`) add behaviour around any client. The usual stack,
built by `factory.build_llm_client`, is::

    TextReActClient?  →  RetryingLLMClient  →  RecordingLLMClient  →  OpenAIClient | AnthropicClient

Recording sits inside retrying so that every attempt is recorded, each with its attempt number,
which the retry layer publishes through `current_attempt`.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol, runtime_checkable

from reasoning_service.models.conversation import LLMReply, LLMRequest

__all__ = ["LLMClient", "current_attempt"]


@runtime_checkable
class LLMClient(Protocol):
    """Anything that answers one `LLMRequest`; errors are `reasoning_service.errors.LLMError`s."""

    @property
    def provider(self) -> str:
        """`openai`, `anthropic`, `local`, `scripted` …: the label on records and metrics."""
        ...

    @property
    def model(self) -> str:
        """The configured model name."""
        ...

    async def complete(self, request: LLMRequest) -> LLMReply:
        """Send one request and return the normalised reply.

        Raises:
            TransientLLMError: worth retrying (rate limits, 5xx, timeouts …).
            PermanentLLMError: retrying the same request cannot help.
        """
        ...

    async def aclose(self) -> None:
        """Release the underlying HTTP connections."""
        ...


current_attempt: ContextVar[int] = ContextVar("current_attempt", default=1)
"""1 for the first try of a request, 2 for the first retry …; set by `RetryingLLMClient` so that
`RecordingLLMClient`, wrapped inside it, can label each attempt without knowing about retries."""
