"""The group commit under the shared stores, on a store whose writes the test opens and fails at will:
no linger, one batch for whatever queued during the write before, waiters settled by their own batch,
failures retried without keeping anyone waiting."""

import asyncio

import pytest

from proxy.memory.backoff import Backoff
from proxy.memory.groupcommit import GroupCommitStore, Write
from proxy.memory.protocol import StoreUnavailable
from proxy.turns import Turn, call_ids
from tests.support.processes import HANG_GUARD, eventually
from tests.support.store_contract import turn
from tests.support.timers import Timers, stepped_timers  # noqa: F401  (stepped_timers: a fixture)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


class GatedStore(GroupCommitStore):
    """Writes into a dict once ``gate`` is open; records each batch's call ids; fails the next ``fail`` writes."""

    backend = "gated"

    def __init__(self, clock: Clock | None = None) -> None:
        super().__init__(ttl_seconds=10, max_entries=100, clock=clock or Clock())
        self.gate = asyncio.Event()
        self.gate.set()
        self.began = asyncio.Event()  # a write has begun (cleared by the test that waits for the next)
        self.enqueued = 0
        self._enqueued_more = asyncio.Event()
        self.fail = 0
        self.batches: list[list[str]] = []
        self.stored: dict[tuple[str, str], Turn] = {}
        self._backoff = Backoff(initial=0.01, maximum=0.01)  # retries at once: the test counts them, not their delay

    async def write(self, batch: list[Write]) -> None:
        self.batches.append([cid for entry in batch for t in entry.turns for cid in call_ids(t)])
        self.began.set()
        await self.gate.wait()
        if self.fail:
            self.fail -= 1
            raise ConnectionError("Connection refused")
        self.stored.update({(entry.tenant, cid): t for entry in batch for t in entry.turns for cid in call_ids(t)})

    async def fetch(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        return {cid: self.stored[(tenant, cid)] for cid in ids if (tenant, cid) in self.stored}

    async def ping(self) -> None:
        pass

    def _enqueue(self, entry: Write) -> None:
        super()._enqueue(entry)
        self.enqueued += 1
        self._enqueued_more.set()

    async def until_enqueued(self, count: int) -> None:
        """Until ``count`` writes in all were handed to the writer."""
        while self.enqueued < count:
            self._enqueued_more.clear()
            await self._enqueued_more.wait()




async def test_a_lone_turn_is_written_at_once_and_what_queues_meanwhile_is_the_next_batch(stepped_timers: Timers) -> None:
    store = GatedStore()
    store.gate.clear()
    first = asyncio.ensure_future(store.remember("t", [turn("call_1")]))
    async with asyncio.timeout(HANG_GUARD):
        await store.began.wait()  # with the timers stepped by hand: a writer that lingered on one would never begin
    assert store.batches == [["call_1"]] and stepped_timers.later == []  # no linger: written at once, alone
    others = [asyncio.ensure_future(store.remember("t", [turn(f"call_{n}")])) for n in (2, 3, 4)]
    await store.until_enqueued(4)
    assert store.batches == [["call_1"]] and not first.done()  # they wait for the write in flight
    store.gate.set()
    await asyncio.wait_for(asyncio.gather(first, *others), HANG_GUARD)
    assert store.batches == [["call_1"], ["call_2", "call_3", "call_4"]]
    assert store.pending == 0
    await store.close()


async def test_a_remember_returns_only_once_its_own_batch_is_written() -> None:
    store = GatedStore()
    store.gate.clear()
    waiting = asyncio.ensure_future(store.remember("t", [turn("call_w")]))
    await store.began.wait()
    assert not waiting.done() and store.stored == {}
    assert list(await store.recall("t", ["call_w"])) == ["call_w"]  # this process sees it meanwhile
    store.gate.set()
    await asyncio.wait_for(waiting, HANG_GUARD)
    assert ("t", "call_w") in store.stored
    await store.close()


async def test_a_failed_write_fails_its_waiters_and_is_retried_while_new_turns_do_not_wait() -> None:
    store = GatedStore()
    store.fail = 2
    with pytest.raises(StoreUnavailable, match="the write failed: ConnectionError: Connection refused"):
        await store.remember("t", [turn("call_f1")])
    with pytest.raises(StoreUnavailable, match="writes are failing"):
        await store.remember("t", [turn("call_f2")])  # at once, kept for the retry
    assert set(await store.recall("t", ["call_f1", "call_f2"])) == {"call_f1", "call_f2"}  # from the pending buffer
    assert not await store.ready()
    assert await store.flush(HANG_GUARD)  # the retries write both
    assert set(store.stored) == {("t", "call_f1"), ("t", "call_f2")} and store.failing is None
    assert store.batches == [["call_f1"], ["call_f1", "call_f2"], ["call_f1", "call_f2"]]  # failed twice, then written
    await store.remember("t", [turn("call_f3")])  # waited for again
    assert ("t", "call_f3") in store.stored
    await store.close()


async def test_a_waiter_that_gives_up_leaves_its_turn_to_the_writer() -> None:
    store = GatedStore()
    store.gate.clear()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):  # as the guard does when the store is slower than its bound
            await store.remember("t", [turn("call_late")])
    store.gate.set()
    assert await store.flush(HANG_GUARD)
    assert ("t", "call_late") in store.stored
    await store.close()


async def test_close_tells_a_waiter_whose_turn_could_not_be_written() -> None:
    store = GatedStore()
    store.gate.clear()  # never opens
    store.flush_timeout = 0
    waiting = asyncio.ensure_future(store.remember("t", [turn("call_never")]))
    await eventually(lambda: store.batches, "the write in flight")
    await store.close()
    with pytest.raises(StoreUnavailable, match="closed before writing"):
        await waiting
    assert store.dropped == 1 and store.pending == 0


async def test_a_pending_turn_past_its_ttl_is_not_recalled_from_the_pending_buffer() -> None:
    clock = Clock()
    store = GatedStore(clock)
    store.gate.clear()  # the turn stays pending for this test
    store.flush_timeout = 0
    waiting = asyncio.ensure_future(store.remember("t", [turn("call_pending")]))
    await store.until_enqueued(1)
    assert set(await store.recall("t", ["call_pending"])) == {"call_pending"}  # read from the buffer
    clock.now += 9.9
    assert set(await store.recall("t", ["call_pending"])) == {"call_pending"}
    clock.now += 0.2
    assert await store.recall("t", ["call_pending"]) == {}  # expired, though still waiting to be written
    assert store.pending == 1
    await store.close()
    with pytest.raises(StoreUnavailable):
        await waiting
