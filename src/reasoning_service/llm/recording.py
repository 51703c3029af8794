"""Record every LLM call attempt as an `LLMInteraction` (DESIGN.md, "The ReAct loop").

Wrap order: `RetryingLLMClient(RecordingLLMClient(adapter))`. Recording sits *inside* retrying so
each attempt — failed ones included — is its own record, numbered by `current_attempt`.

Records go to a sink (the store, a list in tests), never to the log: they hold message contents,
which are case data (PHI). The log gets nothing from here, and the API key never reaches this layer.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from contextvars import ContextVar

from reasoning_service.errors import LLMError
from reasoning_service.llm.base import LLMClient, current_attempt
from reasoning_service.models.conversation import LLMInteraction, LLMReply, LLMRequest

__all__ = ["InteractionSink", "RecordingLLMClient", "interaction_sink", "record_to_current_task"]

InteractionSink = Callable[[LLMInteraction], None] | list[LLMInteraction]
"""Where records go: a callable (e.g. a store writer) or a list to append to."""


class RecordingLLMClient:
    """`LLMClient` wrapper that hands one `LLMInteraction` per attempt to a sink, then re-raises."""

    def __init__(
        self,
        inner: LLMClient,
        sink: InteractionSink,
        *,
        clock: Callable[[], float] = time.perf_counter,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._inner = inner
        self._emit = sink.append if isinstance(sink, list) else sink
        self._clock = clock
        self._now = now

    @property
    def provider(self) -> str:
        return self._inner.provider

    @property
    def model(self) -> str:
        return self._inner.model

    async def complete(self, request: LLMRequest) -> LLMReply:
        started_at = self._now()
        started = self._clock()
        try:
            reply = await self._inner.complete(request)
        except Exception as exc:
            self._emit(self._record(request, started_at, started, error=exc))
            raise
        self._emit(self._record(request, started_at, started, reply=reply))
        return reply

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _record(
        self,
        request: LLMRequest,
        started_at: dt.datetime,
        started: float,
        *,
        reply: LLMReply | None = None,
        error: Exception | None = None,
    ) -> LLMInteraction:
        return LLMInteraction(
            provider=self.provider,
            model=self.model,
            request_messages=list(request.messages),
            reply=reply,
            success=error is None,
            error_kind=error.kind if isinstance(error, LLMError) else None,
            error_message=f"{type(error).__name__}: {error}" if error is not None else None,
            attempt=current_attempt.get(),
            duration_ms=(self._clock() - started) * 1000,
            started_at=started_at,
        )


interaction_sink: ContextVar[list[LLMInteraction] | None] = ContextVar(
    "interaction_sink", default=None
)
"""The interaction list of the criterion being evaluated in this asyncio task.

One LLM client serves many criteria at once; the controller sets this per task so the records of
a shared `RecordingLLMClient` land in the right criterion's trace."""


def record_to_current_task(interaction: LLMInteraction) -> None:
    """Sink for a shared `RecordingLLMClient`: append to the current task's `interaction_sink`."""
    target = interaction_sink.get()
    if target is not None:
        target.append(interaction)
