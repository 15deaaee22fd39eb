"""``client_watch``: a disconnect stops the block, and a block that ends quickly never starts watching.

The watching starts on a timer ``WATCH_AFTER`` into the block. The tests step that timer themselves
(``tests/support/timers.py``): the loop's ``call_later`` hands them the callback instead of the clock, so nothing
here waits for time to pass."""

import asyncio

import pytest

from proxy.disconnect import WATCH_AFTER, ClientGone, client_watch
from tests.support.processes import HANG_GUARD
from tests.support.timers import Timers, stepped_timers  # noqa: F401  (stepped_timers: a fixture)


async def test_a_block_that_ends_within_the_delay_never_waits_for_a_disconnect(stepped_timers: Timers) -> None:
    asked = []

    async def receive() -> dict:
        asked.append(True)
        await asyncio.Event().wait()
        return {}

    with client_watch(receive):
        pass  # a block that ends at once, as an answer from a fast upstream does
    [(delay, handle, _, _)] = stepped_timers.later
    assert delay == WATCH_AFTER and handle.cancelled()  # the block ended first: the watching never starts
    stepped_timers.fire()
    assert asked == []


async def test_a_client_gone_before_the_watching_starts_is_noticed_when_it_does(stepped_timers: Timers) -> None:
    asked = []

    async def receive() -> dict:
        asked.append(True)
        return {"type": "http.disconnect"}

    inside = asyncio.Event()

    async def block() -> None:
        with client_watch(receive):
            inside.set()
            await asyncio.Event().wait()  # only the disconnect can end it

    running = asyncio.get_running_loop().create_task(block())
    await inside.wait()
    assert asked == [] and not running.done()  # not yet watching: the client's leaving is not known
    stepped_timers.fire()  # WATCH_AFTER into the block
    with pytest.raises(ClientGone):
        async with asyncio.timeout(HANG_GUARD):  # call_at: a real timer, not one of the stepped ones
            await running
    assert asked == [True]


async def test_a_cancellation_from_elsewhere_goes_through(stepped_timers: Timers) -> None:
    watching = asyncio.Event()

    async def receive() -> dict:
        watching.set()
        await asyncio.Event().wait()
        return {}

    inside = asyncio.Event()

    async def block() -> None:
        with client_watch(receive):
            inside.set()
            await asyncio.Event().wait()

    running = asyncio.get_running_loop().create_task(block())
    await inside.wait()
    stepped_timers.fire()
    await watching.wait()  # the watcher runs
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
