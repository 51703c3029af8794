"""Record every LLM call attempt as an `LLMInteraction` (DESIGN.md, "The ReAct loop").

Wrap order: `RetryingLLMClient(RecordingLLMClient(adapter))`. Recording sits *inside* retrying so
each attempt — failed ones included — is its own record, numbered by `current_attempt`.

The service's stack has one shared `RecordingLLMClient` whose sink is `record_to_current_task`;
a criterion's calls go through `complete_recorded(llm, request, trace.interactions)`, the one path
by which records reach a criterion's trace (the loop's calls and tree search's alike).

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
from reasoning_service.llm.wrapper import WrapperLLM
from reasoning_service.models.conversation import LLMInteraction, LLMReply, LLMRequest

__all__ = [
    "InteractionSink",
    "RecordingLLMClient",
    "complete_recorded",
    "record_to_current_task",
]

InteractionSink = Callable[[LLMInteraction], None] | list[LLMInteraction]
"""Where records go: a callable (e.g. a store writer) or a list to append to."""


class RecordingLLMClient(WrapperLLM):
    """`LLMClient` wrapper that hands one `LLMInteraction` per attempt to a sink, then re-raises."""

    def __init__(
        self,
        inner: LLMClient,
        sink: InteractionSink,
        *,
        clock: Callable[[], float] = time.perf_counter,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        super().__init__(inner)
        self._emit = sink.append if isinstance(sink, list) else sink
        self._clock = clock
        self._now = now

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


_current_interactions: ContextVar[list[LLMInteraction] | None] = ContextVar(
    "current_interactions", default=None
)
"""The interaction list of the criterion whose call is in flight in this asyncio task.

One LLM client stack serves many criteria at once; `complete_recorded` sets this around each
call so the records of a shared `RecordingLLMClient` land in the right criterion's trace."""


async def complete_recorded(
    llm: LLMClient, request: LLMRequest, interactions: list[LLMInteraction]
) -> LLMReply:
    """The one trace path: call `llm` so that every attempt recorded inside it (by a
    `RecordingLLMClient` whose sink is `record_to_current_task`) is appended to `interactions`.

    The ReAct loop and tree search both call the LLM through here, with their criterion's list.
    """
    token = _current_interactions.set(interactions)
    try:
        return await llm.complete(request)
    finally:
        _current_interactions.reset(token)


def record_to_current_task(interaction: LLMInteraction) -> None:
    """Sink for a shared `RecordingLLMClient`: append to the list `complete_recorded` set."""
    target = _current_interactions.get()
    if target is not None:
        target.append(interaction)
