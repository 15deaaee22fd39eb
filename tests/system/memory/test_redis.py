"""``redis://``: the contract every shared store keeps, against a real redis-server, plus Redis specifics:
keys namespaced per tenant and expired by the server, a turn stored once whatever its number of call ids,
two MGETs per recall, one round trip per batch."""

import asyncio
import hashlib
import logging
import math
import time
from collections import Counter
from collections.abc import Callable

import pytest

from proxy.memory import RECALL_BATCH, StoreUnavailable, open_store
from proxy.memory.backoff import Backoff
from proxy.memory.guarded import GuardedStore
from proxy.memory.redis import RedisStore
from proxy.memory.refusals import MAX_DIGESTS, remember_refused
from proxy.turns import make_turn
from tests.support.processes import HANG_GUARD, RedisServer, eventually
from tests.support.store_contract import Backend, StoreContract, turn

#: Moves every key's expiry ARGV[1] ms closer; a key whose time to live runs out is deleted by the server.
#: Returns the number of keys. (The flag lets it run on a cluster node too, whose keys are in many slots.)
EXPIRE_SOONER = b"""#!lua flags=allow-cross-slot-keys
local keys = redis.call('KEYS', '*')
for _, key in ipairs(keys) do
  local left = redis.call('PTTL', key)
  if left > 0 then redis.call('PEXPIRE', key, left - tonumber(ARGV[1])) end
end
return #keys
"""

#: The bytes every key takes on the server (``MEMORY USAGE``, values and key names), summed.
STORED_BYTES = b"""#!lua flags=allow-cross-slot-keys,no-writes
local total = 0
for _, key in ipairs(redis.call('KEYS', '*')) do
  total = total + redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')
end
return total
"""


@pytest.fixture(scope="module")
def redis_server():
    with RedisServer() as server:
        yield server


class ServerTime:
    """Time for the stores and the server together, without waiting for it: ``elapse`` moves the stores'
    clock on and every key's expiry on the server closer by as much. The contract's seconds count as
    ``SCALE`` seconds here, so the real time a test takes on a loaded machine is lost in the margins."""

    SCALE = 1000

    def __init__(self, *servers: RedisServer) -> None:
        self.servers = servers  # every node of a cluster
        self.ahead = 0.0

    def clock(self) -> float:
        return time.time() + self.ahead  # real time underneath: turns remembered later still sort later

    async def elapse(self, seconds: float) -> None:
        self.ahead += seconds * self.SCALE
        for server in self.servers:
            server.command(b"EVAL", EXPIRE_SOONER, b"0", b"%d" % round(seconds * self.SCALE * 1000))


@pytest.fixture
async def backend(redis_server: RedisServer):
    redis_server.command(b"FLUSHALL")
    now = ServerTime(redis_server)
    opened = Backend(lambda ttl, max_entries: RedisStore(redis_server.url(), ttl * now.SCALE, max_entries, now.clock), now.elapse)
    yield opened
    await opened.close_all()


class TestRedisStore(StoreContract):
    pass


def stats(*servers: RedisServer) -> dict[str, int]:
    """Commands called since ``CONFIG RESETSTAT``, summed over ``servers`` (every node of a cluster)."""
    calls: Counter[str] = Counter()
    for server in servers:
        for line in server.command(b"INFO", b"commandstats").decode().splitlines():
            if line.startswith("cmdstat_") and not line.startswith(("cmdstat_config", "cmdstat_info")):
                calls[line.split(":")[0][len("cmdstat_"):]] += int(line.split("calls=")[1].split(",")[0])
    return dict(calls)


def stored_bytes(*servers: RedisServer) -> int:
    """What every key takes, summed over ``servers`` (every node of a cluster)."""
    return sum(int(server.command(b"EVAL", STORED_BYTES, b"0")[1:-2]) for server in servers)


#: The size of one call's arguments in ``bytes_of_one_turn``.
ARGUMENT = 256 * 1024


async def bytes_of_one_turn(store: RedisStore, servers: tuple[RedisServer, ...], ids: int) -> int:
    """What remembering one turn of ``ids`` calls takes on ``servers``, one of them with ``ARGUMENT`` bytes of arguments."""
    for server in servers:
        server.command(b"FLUSHALL")
    calls = [{"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": "x" * ARGUMENT if n == 0 else "{}"}}
             for n in range(ids)]
    await store.remember("a" * 32, [make_turn(calls)])
    return stored_bytes(*servers)


async def assert_a_turn_is_kept_once(store: RedisStore, *servers: RedisServer) -> None:
    few, more = await bytes_of_one_turn(store, servers, 100), await bytes_of_one_turn(store, servers, 200)
    assert few < 2 * ARGUMENT  # one copy of the turn (once per id: 100 copies)
    assert more < 1.25 * few  # what another hundred ids add is their keys, not the turn again (it was twice as much)


async def assert_a_refusal_costs_bytes_linear_in_its_digests(store: RedisStore, *servers: RedisServer) -> None:
    digests = [hashlib.blake2b(b"%d" % n, digest_size=16).hexdigest() for n in range(MAX_DIGESTS)]
    await remember_refused(store, f"{'a' * 32}/messages", "messages", digests)
    assert stored_bytes(*servers) < MAX_DIGESTS * 1024  # the record once per digest: ~50 KB each


async def test_a_turn_is_kept_once_whatever_its_number_of_call_ids(backend: Backend, redis_server: RedisServer) -> None:
    await assert_a_turn_is_kept_once(backend.open(), redis_server)


async def test_a_refusal_record_costs_bytes_linear_in_its_digests(backend: Backend, redis_server: RedisServer) -> None:
    await assert_a_refusal_costs_bytes_linear_in_its_digests(backend.open(), redis_server)


def store_on_its_own_clock(backend: Backend, server: RedisServer, ttl: float,
                           clock: Callable[[], float] = time.time) -> RedisStore:
    """A store outside the fixture's time, closed with the fixture's stores."""
    store = RedisStore(server.url(), ttl, max_entries=1000, clock=clock)
    backend.opened.append(store)
    return store


async def test_keys_are_per_tenant_and_expire_on_the_server(backend: Backend, redis_server: RedisServer) -> None:
    store = store_on_its_own_clock(backend, redis_server, ttl=30)  # real time: the server's expiry is checked
    before = time.time()
    await store.remember("a" * 32, [turn("call_k1", "call_k2")])
    after = time.time()
    keys = redis_server.command(b"KEYS", b"*").decode().split("\r\n")
    scope = f"toolmend:{'a' * 32}"
    turn_keys = [key for key in keys if key.startswith(f"{scope}:t:")]
    assert f"{scope}:i:call_k1" in keys and f"{scope}:i:call_k2" in keys and "toolmend:turns" in keys and len(turn_keys) == 1
    assert redis_server.command(b"GET", f"{scope}:i:call_k1".encode()).endswith(turn_keys[0].encode()[len(f"{scope}:t:"):] + b"\r\n")
    for key in (f"{scope}:i:call_k1", turn_keys[0]):
        expires_ms = int(redis_server.command(b"PEXPIRETIME", key.encode())[1:-2])
        # 30 s after the write, which the server did between ``before`` and ``after``, however long that took.
        assert math.floor(before * 1000) + 30_000 <= expires_ms <= math.ceil(after * 1000) + 30_000


async def test_two_mgets_per_recall_and_one_round_trip_per_batch(backend: Backend, redis_server: RedisServer) -> None:
    store = store_on_its_own_clock(backend, redis_server, ttl=60, clock=lambda: 1e9)  # time stands still
    await store.remember("t", [turn("call_p1", "call_p2")])
    await store.remember("t", [turn("call_p3")])
    redis_server.command(b"CONFIG", b"RESETSTAT")
    found = await store.recall("t", ["call_p1", "call_p3", "call_p2", "call_none"])
    assert set(found) == {"call_p1", "call_p2", "call_p3"}
    assert stats(redis_server) == {"mget": 2}  # the ids' turns, then the turns: whatever the number of ids
    redis_server.command(b"CONFIG", b"RESETSTAT")
    assert await store.recall("t", ["call_none"]) == {}
    assert stats(redis_server) == {"mget": 1}  # no turn to fetch
    redis_server.command(b"CONFIG", b"RESETSTAT")
    # One batch: both remembered before the writer runs.
    await asyncio.gather(store.remember("t", [turn("call_p4")]), store.remember("u", [turn("call_p5", "call_p6")]))
    # One round trip: a script that SETs each turn and each call id's key and indexes each turn (expired index
    # entries are dropped at most once a second, here by the first batch: no time passes between the two).
    assert stats(redis_server) == {"evalsha": 1, "set": 5, "zadd": 2, "pexpire": 1, "zcard": 1}


async def test_a_dead_server_fails_fast_and_the_guard_recovers_when_it_is_back(caplog) -> None:
    with RedisServer() as server:  # its own server: this test stops and restarts it
        store = RedisStore(server.url(), ttl_seconds=60, max_entries=100)
        # The guard's own timeout is out of the way: only the store's failing or hanging can end the recall.
        guarded = GuardedStore(store, recall_timeout=HANG_GUARD, backoff=Backoff(initial=0.05, maximum=0.2))
        assert await guarded.ready()
        server.stop()
        with caplog.at_level(logging.WARNING, logger="toolmend"):
            assert await guarded.recall("t", ["call_1"]) == {}
        # Fast: the refused connection is the failure, not a timeout waited out.
        warnings = [r.getMessage() for r in caplog.records if r.name == "toolmend"]
        assert len(warnings) == 1 and "operation=recall error=ConnectionError" in warnings[0], warnings
        assert not guarded.available and guarded.failures == 1
        assert await guarded.recall("t", ["call_1"]) == {} and guarded.skipped == 1  # not even tried
        assert not await guarded.ready()
        await guarded.remember("t", [turn("call_during")])  # kept for later
        await eventually(lambda: store.failing, "the writer failing to write it")
        with pytest.raises(StoreUnavailable):
            await store.remember("t", [turn("call_during2")])
        server.start()
        await eventually(lambda: guarded.available, "the guard finding the server back")
        assert await guarded.ready()
        assert await store.flush(HANG_GUARD)
        other = RedisStore(server.url(), ttl_seconds=60, max_entries=100)
        assert set(await other.recall("t", ["call_during", "call_during2"])) == {"call_during", "call_during2"}
        await other.close()
        await guarded.close()


def test_open_store_by_url(redis_server: RedisServer) -> None:
    for url in (redis_server.url(3), "rediss://user:secret@cache.example:6380/1"):
        store = open_store(url, 5, 7)
        assert isinstance(store, RedisStore) and store.backend == "redis"
        assert (store.ttl_seconds, store.max_entries) == (5, 7)


async def test_a_recall_of_many_ids_is_looked_up_in_bounded_batches(backend: Backend, redis_server: RedisServer) -> None:
    # One MGET of a huge history's ids would hold the server for every other client (issue 10 item 7).
    store = backend.open()
    await store.remember("t", [turn("call_kept")])
    redis_server.command(b"CONFIG", b"RESETSTAT")
    ids = [*(f"call_unsigned{n}" for n in range(10 * RECALL_BATCH - 1)), "call_kept"]
    assert set(await store.recall("t", ids)) == {"call_kept"}
    assert stats(redis_server) == {"mget": 11}  # and the one turn found


async def test_a_store_whose_url_asks_for_decoded_replies_recalls_and_evicts(backend: Backend, redis_server: RedisServer) -> None:
    """``?decode_responses=true`` (a redis-py option the URL may carry) makes replies text, not bytes: the turn keys
    read from the id keys and from the index are the same either way."""
    store = RedisStore(redis_server.url() + "?decode_responses=true", 60, max_entries=1)
    backend.opened.append(store)
    calls = [[{"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}] for n in range(2)]
    for made in calls:
        await store.remember("a" * 32, [make_turn(made)])  # the second pushes the first out (max_entries=1)
    recalled = await store.recall("a" * 32, ["call_0", "call_1"])
    assert list(recalled) == ["call_1"] and recalled["call_1"]["tool_calls"] == calls[1]
