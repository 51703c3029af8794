"""The one retry layer: wraps any `LLMClient` and retries `TransientLLMError`s only.

Schedule (`backoff_s`): retry n waits a random part of `base_s * 2**(n-1)` (at most 1 s, 2 s, 4 s
with the defaults: "full jitter", so criteria and replicas that failed together do not retry
together) — unless the error carries a `retry_after_s` from the provider, which then *replaces*
the backoff value exactly. The provider knows when its window reopens; waiting less earns another
429. A Retry-After above `retry_after_cap_s` is not waited for at all: the error is raised at once,
so the controller falls back instead of holding a request for minutes. The random source is
injected (`jitter`, a number in [0, 1]); tests pass `lambda: 1.0` to get the plain schedule.

Permanent errors pass through at once. After the last retry the last `TransientLLMError` itself
is raised (never tenacity's `RetryError`), so callers catch one tree. SDK retries must be off
(`max_retries=0`), or retries multiply.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from collections.abc import Awaitable, Callable, Iterator

from tenacity import AsyncRetrying, RetryCallState, stop_after_attempt

from reasoning_service.errors import TransientLLMError
from reasoning_service.llm.base import LLMClient, current_attempt
from reasoning_service.llm.wrapper import WrapperLLM
from reasoning_service.models.conversation import LLMReply, LLMRequest

__all__ = ["Jitter", "OnRetry", "RetryingLLMClient", "backoff_s", "exceeds_retry_after_cap"]

logger = logging.getLogger("reasoning_service.llm")

Sleep = Callable[[float], Awaitable[None]]
OnRetry = Callable[[TransientLLMError, int, float], None]
"""Called before each wait with the error, the attempt that failed (1-based) and the wait."""
Jitter = Callable[[], float]
"""A number in [0, 1]: the share of the exponential backoff actually waited."""


def backoff_s(
    error: TransientLLMError,
    retry_number: int,
    *,
    base_s: float,
    retry_after_cap_s: float,
    jitter: float = 1.0,
) -> float:
    """Seconds to wait before retry number `retry_number` (1 for the first retry).

    `jitter` (in [0, 1]) scales the exponential backoff only; a Retry-After is waited exactly,
    capped at `retry_after_cap_s` (the retry layer never waits one above the cap: see
    `exceeds_retry_after_cap`).
    """
    if error.retry_after_s is not None:
        return min(max(error.retry_after_s, 0.0), retry_after_cap_s)
    return base_s * 2 ** (retry_number - 1) * min(max(jitter, 0.0), 1.0)


def exceeds_retry_after_cap(error: BaseException, retry_after_cap_s: float) -> bool:
    """True when the provider asks to wait longer than we are willing to: give up at once."""
    retry_after_s = getattr(error, "retry_after_s", None)
    return retry_after_s is not None and retry_after_s > retry_after_cap_s


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
        jitter: Jitter = random.random,
    ) -> None:
        super().__init__(inner)
        self._max_retries = max_retries
        self._base_s = base_s
        self._retry_after_cap_s = retry_after_cap_s
        self._sleep = sleep
        self._on_retry = on_retry
        self._jitter = jitter

    async def complete(self, request: LLMRequest) -> LLMReply:
        """Call the inner client until it answers, fails for good, or retries run out.

        Raises:
            TransientLLMError: the last one, once `max_retries` retries have failed, or at once
                when its Retry-After is above the cap.
            PermanentLLMError: at once, without retrying.
        """
        retrying = AsyncRetrying(
            retry=self._should_retry,
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

    def _should_retry(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if not isinstance(error, TransientLLMError):
            return False
        if exceeds_retry_after_cap(error, self._retry_after_cap_s):
            logger.warning(
                "LLM call failed (%s, provider=%s, model=%s, status=%s); Retry-After %.0fs is "
                "above the %.0fs cap: not retrying",
                type(error).__name__,
                error.provider,
                error.model,
                error.status,
                error.retry_after_s,
                self._retry_after_cap_s,
            )
            return False
        return True

    def _wait_s(self, state: RetryCallState) -> float:
        error = _transient_error(state)
        return backoff_s(
            error,
            state.attempt_number,
            base_s=self._base_s,
            retry_after_cap_s=self._retry_after_cap_s,
            jitter=self._jitter(),
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
