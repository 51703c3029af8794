"""Admission: a bounded number of evaluations in progress, a short bounded wait, then `Overloaded`.

Without it every request is accepted and they all share the CPU, so under a burst every one of
them finishes at the end (issue 13: 200 at once, p50 = p95 = 40 s). With it:

- at most `limit` evaluations run at once;
- up to `queue` more wait, first come first served, each for at most `max_wait_s`;
- anything beyond that, or a wait that times out, raises `Overloaded(retry_after_s)` at once,
  which the API answers with 503 and `Retry-After`.

`retry_after_s` estimates when the evaluations waiting now will have started, so a caller that
comes back then finds room: the recent mean evaluation time (an exponentially weighted mean)
times the waiting evaluations per slot, in whole seconds from 1 to 30 (HTTP wants whole
seconds). Longer only leaves the service idle; shorter only earns another 503.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from reasoning_service.errors import Overloaded

__all__ = ["Admission", "AdmissionState", "retry_after_s"]

_SMOOTHING = 0.2
"""Weight of the newest duration in the running mean."""
_RETRY_AFTER_MIN_S = 1
_RETRY_AFTER_MAX_S = 30


@dataclass(frozen=True)
class AdmissionState:
    """A snapshot for /readyz and the logs."""

    in_progress: int
    waiting: int
    limit: int
    queue: int
    rejected: int
    """Requests turned away since start-up."""


class Admission:
    """`async with admission.slot(): ...` runs the body within the limits (module docstring)."""

    def __init__(
        self,
        *,
        limit: int,
        queue: int,
        max_wait_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1 or queue < 0 or max_wait_s < 0:
            raise ValueError("admission needs limit ≥ 1, queue ≥ 0 and max_wait_s ≥ 0")
        self.limit = limit
        self.queue = queue
        self.max_wait_s = max_wait_s
        self._clock = clock
        self._in_progress = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._mean_s = 0.0
        self._rejected = 0

    @property
    def state(self) -> AdmissionState:
        return AdmissionState(
            in_progress=self._in_progress,
            waiting=len(self._waiters),
            limit=self.limit,
            queue=self.queue,
            rejected=self._rejected,
        )

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the `limit` slots for the body.

        Raises:
            Overloaded: the wait queue is full, or no slot freed up within `max_wait_s`.
        """
        await self._acquire()
        started = self._clock()
        try:
            yield
        finally:
            self._observe(self._clock() - started)
            self._release()

    async def _acquire(self) -> None:
        if self._in_progress < self.limit and not self._waiters:
            self._in_progress += 1
            return
        if len(self._waiters) >= self.queue:
            raise self._reject("the evaluation queue is full")
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.max_wait_s)
        except TimeoutError:
            if waiter.done():  # handed a slot just as the wait ran out: give it back
                self._release()
            else:
                self._waiters.remove(waiter)
            raise self._reject(
                f"no evaluation slot freed up within {self.max_wait_s:g} s"
            ) from None
        except asyncio.CancelledError:  # the client went away while waiting
            if waiter.done():
                self._release()
            else:
                self._waiters.remove(waiter)
            raise

    def _release(self) -> None:
        """Hand the slot to the first waiter, else free it."""
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on: in_progress stays the same
                return
        self._in_progress -= 1

    def _observe(self, duration_s: float) -> None:
        if self._mean_s == 0.0:
            self._mean_s = duration_s
        else:
            self._mean_s += _SMOOTHING * (duration_s - self._mean_s)

    def _reject(self, why: str) -> Overloaded:
        self._rejected += 1
        after = retry_after_s(self._mean_s, waiting=len(self._waiters), slots=self.limit)
        return Overloaded(f"{why}; retry after {after} s", retry_after_s=after)


def retry_after_s(mean_evaluation_s: float, *, waiting: int, slots: int) -> int:
    """Whole seconds until the `waiting` evaluations have likely started: `waiting / slots`
    rounds of the mean evaluation, clamped to 1..30 s (1 s before any evaluation finished)."""
    estimate = mean_evaluation_s * max(waiting, 1) / max(slots, 1)
    return min(_RETRY_AFTER_MAX_S, max(_RETRY_AFTER_MIN_S, math.ceil(estimate)))
