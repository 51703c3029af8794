"""Readiness for /readyz: cheap, cached, and answered within a bound even when the store is slow.

The store is asked (a row count, no parsing) at most once per `ttl_s`; concurrent probes share
one question. A probe waits at most `timeout_s` for it, then gets the last known answer (or
"not ready" before there is one), so a busy service never fails its probe by being slow.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from reasoning_service.errors import StoreError
from reasoning_service.store import Store

__all__ = ["Readiness", "ReadinessReport"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReadinessReport:
    ready: bool
    policies: int
    """Stored policies (versions included); ready needs at least one."""
    checked_at: float
    """`clock()` time of the store's answer."""


class Readiness:
    """`await readiness.check()`: the store answers and holds at least one policy."""

    def __init__(
        self,
        store: Store,
        *,
        ttl_s: float = 2.0,
        timeout_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s
        self._clock = clock
        self._last: ReadinessReport | None = None
        self._asking: asyncio.Task[ReadinessReport] | None = None

    async def check(self) -> ReadinessReport:
        """The last answer when fresh, else the store's (waiting at most `timeout_s`)."""
        last = self._last
        if last is not None and self._clock() - last.checked_at < self._ttl_s:
            return last
        if self._asking is None or self._asking.done():
            self._asking = asyncio.create_task(self._ask())
        try:
            return await asyncio.wait_for(asyncio.shield(self._asking), self._timeout_s)
        except TimeoutError:
            return self._last or ReadinessReport(ready=False, policies=0, checked_at=self._clock())

    async def _ask(self) -> ReadinessReport:
        try:
            policies = await self._store.run(lambda tables: tables.count("policies"))
        except StoreError as exc:
            logger.warning("readiness: the store failed", exc_info=exc)
            policies, ready = 0, False
        else:
            ready = policies > 0
        self._last = ReadinessReport(ready=ready, policies=policies, checked_at=self._clock())
        return self._last
