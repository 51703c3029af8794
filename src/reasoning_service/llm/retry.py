"""The one retry layer: wraps any `LLMClient` and retries `TransientLLMError`s only.

Schedule (`backoff_s`): retry n waits `base_s * 2**(n-1)` (1 s, 2 s, 4 s with the defaults) — unless
the error carries a `retry_after_s` from the provider, which then *replaces* the backoff value,
capped at `retry_after_cap_s`. The provider knows when its window reopens; waiting longer wastes
the budget and waiting less earns another 429. No jitter: one service process, few concurrent
calls, and tests assert exact schedules.

Permanent errors pass through at once. After the last retry the last `TransientLLMError` itself
is raised (never tenacity's `RetryError`), so callers catch one tree. SDK retries must be off
(`max_retries=0`), or retries multiply.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from reasoning_service.errors import TransientLLMError
from reasoning_service.llm.base import LLMClient, current_attempt
from reasoning_service.llm.wrapper import WrapperLLM
from reasoning_service.models.conversation import LLMReply, LLMRequest

__all__ = ["OnRetry", "RetryingLLMClient", "backoff_s"]

logger = logging.getLogger("reasoning_service.llm")

Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[TransientLLMError, int, float], None]
"""Called before each wait with the error, the attempt that failed (1-based) and the wait."""


def backoff_s(
    error: TransientLLMError, retry_number: int, *, base_s: float, retry_after_cap_s: float
) -> float:
    """Seconds to wait before retry number `retry_number` (1 for the first retry)."""
    if error.retry_after_s is not None:
        return min(max(error.retry_after_s, 0.0), retry_after_cap_s)
    return base_s * 2 ** (retry_number - 1)


class RetryingLLMClient(WrapperLLM):
    """`LLMClient` wrapper that retries transient failures with backoff (see module docstring)."""

    def __init__(
        self,
        inner: LLMClient,
        *,
        max_retries: int = 3,
        base_s: float = 1.0,
        retry_after_cap_s: float = 30.0,
        sleep: Sleep = asyncio.sleep,
        on_retry: OnRetry | None = None,
    ) -> None:
        super().__init__(inner)
        self._max_retries = max_retries
        self._base_s = base_s
        self._retry_after_cap_s = retry_after_cap_s
        self._sleep = sleep
        self._on_retry = on_retry

    async def complete(self, request: LLMRequest) -> LLMReply:
        """Call the inner client until it answers, fails for good, or retries run out.

        Raises:
            TransientLLMError: the last one, once `max_retries` retries have failed.
            PermanentLLMError: at once, without retrying.
        """
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(TransientLLMError),
            stop=stop_after_attempt(self._max_retries + 1),
            wait=self._wait_s,
            sleep=self._sleep,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        return await retrying(self._attempt, request, itertools.count(1))

    async def _attempt(self, request: LLMRequest, attempt_numbers: Iterator[int]) -> LLMReply:
        token = current_attempt.set(next(attempt_numbers))
        try:
            return await self._inner.complete(request)
        finally:
            current_attempt.reset(token)

    def _wait_s(self, state: RetryCallState) -> float:
        error = _transient_error(state)
        return backoff_s(
            error,
            state.attempt_number,
            base_s=self._base_s,
            retry_after_cap_s=self._retry_after_cap_s,
        )

    def _before_sleep(self, state: RetryCallState) -> None:
        error = _transient_error(state)
        wait_s = state.next_action.sleep if state.next_action else 0.0
        logger.warning(
            "LLM call failed (%s, provider=%s, model=%s, status=%s); retry %d of %d in %.2fs",
            type(error).__name__,
            error.provider,
            error.model,
            error.status,
            state.attempt_number,
            self._max_retries,
            wait_s,
        )
        if self._on_retry is not None:
            self._on_retry(error, state.attempt_number, wait_s)


def _transient_error(state: RetryCallState) -> TransientLLMError:
    """The error of the attempt that just failed; tenacity only retries this type."""
    error = state.outcome.exception() if state.outcome else None
    if not isinstance(error, TransientLLMError):  # pragma: no cover - guarded by `retry=`
        raise TypeError(f"retry state without a transient error: {error!r}")
    return error
