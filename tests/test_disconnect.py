"""``client_watch``: a disconnect stops the block, and a block that ends quickly never starts watching."""

import asyncio

import pytest

from proxy.disconnect import WATCH_AFTER, ClientGone, client_watch


async def test_a_block_that_ends_within_the_delay_never_waits_for_a_disconnect() -> None:
    asked = []

    async def receive() -> dict:
        asked.append(True)
        await asyncio.Event().wait()
        return {}

    with client_watch(receive):
        await asyncio.sleep(0)
    await asyncio.sleep(WATCH_AFTER * 2)
    assert asked == []


async def test_a_client_gone_before_the_watching_starts_is_noticed_when_it_does() -> None:
    async def receive() -> dict:
        return {"type": "http.disconnect"}

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ClientGone):
        with client_watch(receive):
            await asyncio.sleep(10)
    assert WATCH_AFTER <= loop.time() - started < 1


async def test_a_cancellation_from_elsewhere_goes_through() -> None:
    async def receive() -> dict:
        await asyncio.Event().wait()
        return {}

    async def block() -> None:
        with client_watch(receive):
            await asyncio.sleep(10)

    running = asyncio.get_running_loop().create_task(block())
    await asyncio.sleep(WATCH_AFTER * 2)  # the watcher runs
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
