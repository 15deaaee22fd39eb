"""``redis://``: the contract every shared store keeps, against a real redis-server, plus Redis specifics:
keys namespaced per tenant and expired by the server, one MGET per recall, one round trip per batch."""

import asyncio
import time

import pytest

from proxy.memory import StoreUnavailable, open_store
from proxy.memory.guarded import GuardedStore
from proxy.memory.redis import RedisStore
from tests.support.processes import RedisServer
from tests.support.store_contract import Backend, StoreContract, turn


@pytest.fixture(scope="module")
def redis_server():
    with RedisServer() as server:
        yield server


@pytest.fixture
async def backend(redis_server: RedisServer):
    redis_server.command(b"FLUSHALL")
    opened = Backend(lambda ttl, max_entries: RedisStore(redis_server.url(), ttl, max_entries), asyncio.sleep)
    yield opened
    await opened.close_all()


class TestRedisStore(StoreContract):
    pass


def stats(server: RedisServer) -> dict[str, int]:
    info = server.command(b"INFO", b"commandstats").decode()
    return {line.split(":")[0][len("cmdstat_"):]: int(line.split("calls=")[1].split(",")[0])
            for line in info.splitlines() if line.startswith("cmdstat_") and not line.startswith(("cmdstat_config", "cmdstat_info"))}


async def test_keys_are_per_tenant_and_expire_on_the_server(backend: Backend, redis_server: RedisServer) -> None:
    store = backend.open(ttl=30)
    await store.remember("a" * 32, [turn("call_k1", "call_k2")])
    await store.flush(5)
    keys = redis_server.command(b"KEYS", b"*").decode()
    assert f"toolmend:{'a' * 32}:call_k1" in keys and f"toolmend:{'a' * 32}:call_k2" in keys and "toolmend:turns" in keys
    ttl_ms = int(redis_server.command(b"PTTL", f"toolmend:{'a' * 32}:call_k1".encode())[1:-2])
    assert 29_000 < ttl_ms <= 30_000


async def test_one_mget_per_recall_and_one_round_trip_per_batch(backend: Backend, redis_server: RedisServer) -> None:
    store = backend.open()
    await store.remember("t", [turn("call_p1", "call_p2")])
    await store.remember("t", [turn("call_p3")])  # the same batch: the writer has not run yet
    await store.flush(5)
    redis_server.command(b"CONFIG", b"RESETSTAT")
    found = await store.recall("t", ["call_p1", "call_p3", "call_p2", "call_none"])
    assert set(found) == {"call_p1", "call_p2", "call_p3"}
    assert stats(redis_server) == {"mget": 1}  # one round trip, whatever the number of ids
    redis_server.command(b"CONFIG", b"RESETSTAT")
    await store.remember("t", [turn("call_p4")])
    await store.remember("u", [turn("call_p5", "call_p6")])
    await store.flush(5)
    # One round trip: a script that SETs each call id's key and indexes each turn (expired index entries
    # are dropped at most once a second, here by the first batch).
    assert stats(redis_server) == {"evalsha": 1, "set": 3, "zadd": 2, "pexpire": 1, "zcard": 1}


async def test_a_dead_server_fails_fast_and_the_guard_recovers_when_it_is_back() -> None:
    with RedisServer() as server:  # its own server: this test stops and restarts it
        store = RedisStore(server.url(), ttl_seconds=60, max_entries=100)
        store.peer_grace = 0
        guarded = GuardedStore(store)
        assert await guarded.ready()
        server.stop()
        started = time.monotonic()
        assert await guarded.recall("t", ["call_1"]) == {}
        assert time.monotonic() - started < 1
        assert not guarded.available and guarded.failures == 1
        assert await guarded.recall("t", ["call_1"]) == {} and guarded.skipped == 1  # not even tried
        assert not await guarded.ready()
        await guarded.remember("t", [turn("call_during")])  # kept for later
        await asyncio.sleep(0.1)
        with pytest.raises(StoreUnavailable):
            await store.remember("t", [turn("call_during2")])
        server.start()
        deadline = time.monotonic() + 10
        while not guarded.available and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert guarded.available and await guarded.ready()
        assert await store.flush(5)
        other = RedisStore(server.url(), ttl_seconds=60, max_entries=100)
        assert set(await other.recall("t", ["call_during", "call_during2"])) == {"call_during", "call_during2"}
        await other.close()
        await guarded.close()


def test_open_store_by_url(redis_server: RedisServer) -> None:
    for url in (redis_server.url(3), "rediss://user:secret@cache.example:6380/1"):
        store = open_store(url, 5, 7)
        assert isinstance(store, RedisStore) and store.backend == "redis"
        assert (store.ttl_seconds, store.max_entries) == (5, 7)
