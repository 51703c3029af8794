"""Admission: a bounded number in progress, a bounded wait, then `Overloaded` at once."""

from __future__ import annotations

import asyncio

import pytest

from reasoning_service.errors import Overloaded
from reasoning_service.service.admission import Admission, retry_after_s


async def hold(admission: Admission, release: asyncio.Event, log: list[str], name: str) -> None:
    async with admission.slot():
        log.append(name)
        await release.wait()


async def test_past_the_limit_and_the_queue_a_caller_is_turned_away_at_once():
    admission = Admission(limit=2, queue=1, max_wait_s=10)
    release, log = asyncio.Event(), []
    running = [asyncio.create_task(hold(admission, release, log, n)) for n in ("a", "b", "c")]
    await asyncio.sleep(0)
    assert log == ["a", "b"]
    assert admission.state.in_progress == 2 and admission.state.waiting == 1

    with pytest.raises(Overloaded) as refused:
        async with asyncio.timeout(0.5):  # at once, not after max_wait_s
            async with admission.slot():
                pass
    assert refused.value.retry_after_s >= 1
    assert admission.state.rejected == 1

    release.set()
    await asyncio.gather(*running)
    assert log == ["a", "b", "c"]  # the waiter got the slot, first come first served
    assert admission.state.in_progress == 0 and admission.state.waiting == 0


async def test_a_wait_longer_than_max_wait_is_turned_away_and_leaves_the_queue():
    admission = Admission(limit=1, queue=4, max_wait_s=0.05)
    release, log = asyncio.Event(), []
    holder = asyncio.create_task(hold(admission, release, log, "a"))
    await asyncio.sleep(0)
    with pytest.raises(Overloaded, match=r"within 0\.05 s"):
        async with admission.slot():
            pass
    assert admission.state.waiting == 0
    release.set()
    await holder
    async with admission.slot():  # the slot was given back, not leaked
        assert admission.state.in_progress == 1


async def test_a_caller_that_goes_away_while_waiting_frees_its_place():
    admission = Admission(limit=1, queue=1, max_wait_s=10)
    release, log = asyncio.Event(), []
    holder = asyncio.create_task(hold(admission, release, log, "a"))
    waiter = asyncio.create_task(hold(admission, release, log, "gone"))
    await asyncio.sleep(0)
    assert admission.state.waiting == 1
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert admission.state.waiting == 0
    release.set()
    await holder
    assert log == ["a"] and admission.state.in_progress == 0


def test_retry_after_is_when_the_waiting_evaluations_have_started_in_whole_seconds():
    assert retry_after_s(0.0, waiting=16, slots=8) == 1  # nothing measured yet
    assert retry_after_s(1.5, waiting=16, slots=8) == 3
    assert retry_after_s(0.2, waiting=4, slots=8) == 1
    assert retry_after_s(100.0, waiting=16, slots=1) == 30
