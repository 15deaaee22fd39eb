"""``GuardedStore``: every backend fails the same way, and the proxy serves on without its memory."""

import asyncio
import logging

import httpx
import orjson

from proxy.memory.backoff import Backoff
from proxy.memory.guarded import GuardedStore
from proxy.memory.inprocess import InProcessStore
from proxy.turns import make_turn
from tests.support.processes import HANG_GUARD, eventually
from tests.support.proxy_fixtures import (
    AUTH,
    call,
    completion,
    orphan_history,
    running_proxy,
    tenant_for,
)

PATH = "/v1/chat/completions"


class FlakyStore(InProcessStore):
    """The in-process store, with a switch that makes every operation fail like a dead server."""

    backend = "flaky"

    def __init__(self) -> None:
        super().__init__(ttl_seconds=60, max_entries=100)
        self.broken = False
        self.hanging = False  # never answers: slower than any timeout
        self.calls: list[str] = []

    async def _maybe_fail(self, operation: str) -> None:
        self.calls.append(operation)
        if self.hanging:
            await asyncio.get_running_loop().create_future()
        if self.broken:
            raise ConnectionError("Connection refused")

    async def recall(self, tenant, ids):
        await self._maybe_fail("recall")
        return await super().recall(tenant, ids)

    async def remember(self, tenant, turns):
        await self._maybe_fail("remember")
        await super().remember(tenant, turns)

    async def ready(self):
        await self._maybe_fail("ready")
        return True


class SteppedBackoff(Backoff):
    """A backoff whose clock is the test: each wait notes its delay and ends only when the test says the
    delay has passed, so probes are counted per delay waited out rather than per second of real time."""

    def __init__(self) -> None:
        super().__init__(initial=0.05, maximum=0.2, jitter=0)
        self.delays: list[float] = []
        self._passed = asyncio.Event()

    async def wait(self) -> None:
        self.delays.append(self.next_delay())
        await self._passed.wait()
        self._passed.clear()

    def elapse(self) -> None:
        """The delay being waited out has passed."""
        self._passed.set()


async def test_a_failing_store_is_skipped_then_probed_with_backoff_until_it_is_back(caplog) -> None:
    store, backoff = FlakyStore(), SteppedBackoff()
    memory = GuardedStore(store, backoff=backoff)
    await memory.remember("t", [make_turn([call("call_1")])])
    store.broken = True
    with caplog.at_level(logging.INFO, logger="toolmend"):
        assert await memory.recall("t", ["call_1"]) == {}
        assert not memory.available and memory.failures == 1
        await eventually(lambda: backoff.delays, "the probe waiting out its first delay")
        for _ in range(20):  # requests while it is down never reach it
            assert await memory.recall("t", ["call_1"]) == {}
        assert memory.skipped == 20 and store.calls.count("recall") == 1
        assert not await memory.ready()
        await memory.remember("t", [make_turn([call("call_2")])])  # swallowed, counted
        assert memory.failures == 2
        assert store.calls.count("ready") == 0  # no probe before its delay: not on requests, not in a tight loop
        for probes in (1, 2, 3):
            backoff.elapse()
            await eventually(lambda: len(backoff.delays) == probes + 1, "the next probe, then its delay")
            assert store.calls.count("ready") == probes  # one probe per delay
        assert backoff.delays == [0.05, 0.1, 0.2, 0.2]  # doubling up to the cap
        store.broken = False
        backoff.elapse()
        await eventually(lambda: memory.available, "the probe finding the store back")
        assert store.calls.count("ready") == 4 and await memory.ready()
        assert list(await memory.recall("t", ["call_1"])) == ["call_1"]
    unavailable = [r for r in caplog.records if "memory store unavailable" in r.getMessage()]
    assert len(unavailable) == 1 and "backend=flaky" in unavailable[0].getMessage()
    assert "ConnectionError: Connection refused" in unavailable[0].getMessage()
    assert any("memory store available again backend=flaky" in r.getMessage() for r in caplog.records)
    await memory.close()


async def test_a_slow_recall_counts_as_a_failure() -> None:
    store = FlakyStore()
    memory = GuardedStore(store, recall_timeout=0.05)
    store.hanging = True
    assert await memory.recall("t", ["call_1"]) == {}
    assert not memory.available
    await memory.close()  # also stops the probe


async def test_every_recall_is_counted_by_the_guard_as_hits_misses_or_errors() -> None:
    store, seen = FlakyStore(), []
    memory = GuardedStore(store, counted=lambda backend, result, ids: seen.append((backend, result, ids)))
    await memory.remember("t", [make_turn([{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])])
    await memory.recall("t", ["call_1", "call_2", "call_3"])
    store.broken = True
    await memory.recall("t", ["call_1", "call_2"])  # fails: the store goes down
    await memory.recall("t", ["call_1"])  # skipped while down
    assert seen == [("flaky", "hit", 0), ("flaky", "miss", 0),  # both series from the start
                    ("flaky", "hit", 1), ("flaky", "miss", 2), ("flaky", "error", 2), ("flaky", "error", 1)]
    await memory.close()


async def test_a_recall_counts_no_hits_or_misses_of_zero_ids() -> None:
    seen: list[tuple[str, str, int]] = []
    memory = GuardedStore(InProcessStore(60, 100), counted=lambda backend, result, ids: seen.append((backend, result, ids)))
    await memory.remember("t", [make_turn([call("call_1")])])
    seen.clear()
    await memory.recall("t", ["call_2"])
    await memory.recall("t", ["call_1"])
    assert seen == [("memory", "miss", 1), ("memory", "hit", 1)]


async def test_the_in_process_store_is_called_without_a_timeout(monkeypatch) -> None:
    # Its operations never wait, so no timeout could fire in them: none is armed (a subclass that waits gets one,
    # as the tests above show).
    def no_timer(delay: float | None) -> None:
        raise AssertionError("a timeout was armed")

    memory = GuardedStore(InProcessStore(60, 100))
    monkeypatch.setattr(asyncio, "timeout", no_timer)
    await memory.remember("t", [make_turn([call("call_1")])])
    assert list(await memory.recall("t", ["call_1", "call_2"])) == ["call_1"]
    assert memory.available and memory.failures == 0


async def test_a_remember_slower_than_its_bound_returns_at_the_bound_and_counts_as_a_failure(caplog) -> None:
    # The answer whose end waits on it goes out: a store that never answers delays it by the bound, no more.
    store = FlakyStore()
    memory = GuardedStore(store, remember_timeout=0.05)
    store.hanging = True
    with caplog.at_level(logging.WARNING, logger="toolmend"):
        await asyncio.wait_for(memory.remember("t", [make_turn([call("call_1")])]), HANG_GUARD)
    assert not memory.available and memory.failures == 1
    assert "operation=remember error=TimeoutError" in caplog.text
    await memory.close()


async def test_while_the_store_is_down_a_remember_is_handed_over_but_not_waited_for() -> None:
    store = FlakyStore()
    memory = GuardedStore(store, remember_timeout=0.05)
    store.hanging = True
    await memory.remember("t", [make_turn([call("call_1")])])  # waits out the bound: now down
    memory.remember_timeout = HANG_GUARD  # only not waiting at all can end the next one before the guard below
    await asyncio.wait_for(memory.remember("t", [make_turn([call("call_2")])]), HANG_GUARD / 2)
    assert store.calls == ["remember", "remember"]  # the store got both
    assert memory.failures == 1  # not waiting is no new failure
    await memory.close()


async def test_requests_go_through_with_fallback_repairs_and_say_the_memory_is_unavailable(upstream) -> None:
    route = upstream.post("/chat/completions").mock(return_value=httpx.Response(200, json=completion([call("call_new")])))
    store = FlakyStore()
    async with running_proxy(store=store) as proxy:
        await proxy.state.store.remember(tenant_for(), [make_turn([call("call_known", arguments='{"x": 1}')])])
        healthy = await proxy.client.post(PATH, json={"messages": orphan_history("call_known")}, headers=AUTH)
        assert "x-toolmend-memory" not in healthy.headers
        assert orjson.loads(route.calls.last.request.content)["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'
        store.broken = True
        for _ in range(3):
            response = await proxy.client.post(PATH, json={"messages": orphan_history("call_known")}, headers=AUTH)
            assert response.status_code == 200
            assert response.headers["x-toolmend-memory"] == "unavailable"
            assert response.headers["x-toolmend-repairs"] == "TM101=1"
            sent = orjson.loads(route.calls.last.request.content)["messages"][1]["tool_calls"][0]
            assert sent["function"] == {"name": "unknown_tool", "arguments": "{}"}  # the orphan policy's synthesis
        ready = await proxy.client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "degraded", "memory": {"backend": "flaky", "ready": False}}
        assert proxy.state.store.failures >= 2  # the failed recall, and the failed remember of the answer
