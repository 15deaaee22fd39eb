"""``redis+cluster://``: the contract every shared store keeps, against a real three-master Redis Cluster
started from redis-server, plus what the cluster needs: a tenant's keys in one hash slot, one script call
per tenant, the bound per tenant, and a master killed and restarted."""

import asyncio
import logging

import httpx
import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError

from proxy.memory import check_url, open_store, redact
from proxy.memory.backoff import Backoff
from proxy.memory.guarded import GuardedStore
from proxy.memory.redis_cluster import RedisClusterStore
from tests.support.processes import HANG_GUARD, ProxyProcess, RedisCluster, RedisClusterNode, eventually
from tests.support.store_contract import Backend, StoreContract, turn
from tests.test_memory_redis import (
    ServerTime,
    assert_a_refusal_costs_bytes_linear_in_its_digests,
    assert_a_turn_is_kept_once,
    stats,
)

TENANTS = ("a" * 32, "b" * 32, "c" * 32)  # tenant ids are 32 hex digits (proxy.tenant)


@pytest.fixture(scope="module")
def cluster():
    with RedisCluster() as started:
        yield started


@pytest.fixture
async def backend(cluster: RedisCluster):
    cluster.command(b"FLUSHALL")
    now = ServerTime(*cluster.nodes)
    opened = Backend(lambda ttl, max_entries: RedisClusterStore(cluster.url(), ttl * now.SCALE, max_entries, now.clock),
                     now.elapse)
    yield opened
    await opened.close_all()


class TestRedisClusterStore(StoreContract):
    pass


def slot(cluster: RedisCluster, key: str) -> int:
    return int(cluster.nodes[0].command(b"CLUSTER", b"KEYSLOT", key.encode())[1:-2])


def tenant_on(cluster: RedisCluster, node: RedisClusterNode) -> str:
    """A tenant id whose turns the master ``node`` holds."""
    return next(tenant for tenant in (f"{n:032x}" for n in range(1000)) if cluster.node_of(f"{{{tenant}}}") is node)


async def test_a_tenants_keys_share_one_slot_and_a_batch_is_one_script_call_per_tenant(backend: Backend,
                                                                                       cluster: RedisCluster) -> None:
    tenants = [tenant_on(cluster, node) for node in cluster.nodes]
    store = backend.open()
    for tenant in tenants:
        await store.remember(tenant, [turn("call_warm")])  # each master loads the script once
    cluster.command(b"CONFIG", b"RESETSTAT")
    # One batch: every tenant's turn remembered before the writer runs.
    await asyncio.gather(*(store.remember(tenant, [turn("call_1", "call_2")]) for tenant in tenants))
    for tenant, node in zip(tenants, cluster.nodes):
        assert stats(node) == {"evalsha": 1, "set": 3, "zadd": 1, "pexpire": 1, "zcard": 1}
        keys = [f"toolmend:{{{tenant}}}:i:call_1", f"toolmend:{{{tenant}}}:i:call_2", f"toolmend:turns:{{{tenant}}}"]
        keys.append(f"toolmend:{{{tenant}}}:t:" + node.command(b"GET", keys[0].encode()).split(b"\r\n")[1].decode())
        assert len({slot(cluster, key) for key in keys}) == 1
        assert all(node.command(b"EXISTS", key.encode()) == b":1\r\n" for key in keys)
    cluster.command(b"CONFIG", b"RESETSTAT")
    assert set(await store.recall(tenants[0], ["call_2", "call_1", "call_none"])) == {"call_1", "call_2"}
    assert stats(*cluster.nodes) == {"mget": 2}  # the ids, then their turns: to the tenant's master


async def test_a_turn_is_kept_once_whatever_its_number_of_call_ids(backend: Backend, cluster: RedisCluster) -> None:
    await assert_a_turn_is_kept_once(backend.open(), *cluster.nodes)


async def test_a_refusal_record_costs_bytes_linear_in_its_digests(backend: Backend, cluster: RedisCluster) -> None:
    await assert_a_refusal_costs_bytes_linear_in_its_digests(backend.open(), *cluster.nodes)


async def test_max_entries_bounds_each_tenant(backend: Backend) -> None:
    # A count of every tenant's turns would be one key that every write touches, in one slot: each tenant
    # has its own (docs/memory.md: the cluster as a whole is bounded by the time to live and maxmemory).
    store = backend.open(max_entries=2)
    for n in range(3):
        await store.remember(TENANTS[0], [turn(f"call_a{n}")])
    await store.remember(TENANTS[1], [turn("call_b0")])
    reader = backend.open()
    assert sorted(await reader.recall(TENANTS[0], ["call_a0", "call_a1", "call_a2"])) == ["call_a1", "call_a2"]
    assert list(await reader.recall(TENANTS[1], ["call_b0"])) == ["call_b0"]


async def test_urls_name_several_nodes_and_hide_the_password(cluster: RedisCluster) -> None:
    for url in (cluster.url(), "rediss+cluster://user:secret@cache-1.example:7000,cache-2.example:7001/0?socket_timeout=2",
                "redis+cluster://[::1]:7000"):
        check_url(url)
        store = open_store(url, 5, 7)
        assert isinstance(store, RedisClusterStore) and store.backend == "redis-cluster"
        assert (store.ttl_seconds, store.max_entries) == (5, 7)
        await store.close()
    assert (redact("rediss+cluster://user:secret@cache-1.example:7000,cache-2.example:7001/0")
            == "rediss+cluster://user:***@cache-1.example:7000,cache-2.example:7001/0")
    for url, says in (("redis+cluster://127.0.0.1:7000/1", "database 0"), ("redis+cluster://127.0.0.1:7000,:7001", "host"),
                      ("redis+cluster://127.0.0.1:port", "port"), ("redis+cluster:///0", "host")):
        with pytest.raises(ValueError, match=says):
            check_url(url)


async def test_a_node_without_a_host_is_refused_not_dialled_as_localhost() -> None:
    # A store opened from a URL that skipped the settings check (Settings built in code) used to hand
    # redis-py a node with host None, which it dials as localhost.
    for url in ("redis+cluster://127.0.0.1:7000,:7001", "redis+cluster://:7000"):
        with pytest.raises(ValueError, match="needs a host"):
            open_store(url, 5, 7)


async def test_a_password_reaches_every_master(backend: Backend, cluster: RedisCluster) -> None:
    tenants = [tenant_on(cluster, node) for node in cluster.nodes]
    password = "pass,word"  # a comma, as between the nodes of the URL
    cluster.command(b"CONFIG", b"SET", b"requirepass", password.encode())
    try:
        url = cluster.url().replace("://", f"://:{password}@")
        check_url(url)
        assert password not in redact(url)
        store = RedisClusterStore(url, 60, 100)
        backend.opened.append(store)
        for tenant in tenants:
            await store.remember(tenant, [turn("call_pw")])
        reader = RedisClusterStore(url, 60, 100)
        backend.opened.append(reader)
        for tenant in tenants:
            assert list(await reader.recall(tenant, ["call_pw"])) == ["call_pw"]
    finally:
        for node in cluster.nodes:
            with redis.Redis(port=node.port, password=password) as client:
                client.config_set("requirepass", "")


async def test_rediss_cluster_speaks_tls_and_redis_cluster_does_not() -> None:
    # What the store sends first to a node: a TLS ClientHello (handshake record 0x16, version 3.x), or RESP.
    first_bytes: asyncio.Queue[bytes] = asyncio.Queue()

    async def node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first_bytes.put_nowait(await reader.read(2))
        writer.close()

    server = await asyncio.start_server(node, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    for scheme, expected in (("rediss+cluster", b"\x16\x03"), ("redis+cluster", b"*")):
        store = RedisClusterStore(f"{scheme}://127.0.0.1:{port}", 60, 100)
        with pytest.raises(Exception):  # noqa: B017 - not a Redis node: whatever fails, only the bytes matter
            await store.ready()
        assert (await asyncio.wait_for(first_bytes.get(), HANG_GUARD)).startswith(expected)
        await store.close()
    server.close()
    await server.wait_closed()


def test_the_proxy_serves_with_its_memory_on_the_cluster(cluster: RedisCluster) -> None:
    # Nothing is forwarded: the upstream is never contacted.
    with ProxyProcess("http://127.0.0.1:9/v1", "--memory", cluster.url()) as proxy:
        ready = httpx.get(proxy.url + "/readyz", timeout=HANG_GUARD).json()
        log = proxy.log()
    assert ready["memory"] == {"backend": "redis-cluster", "ready": True}
    assert f"memory store redis-cluster ready: {cluster.url()}" in log


async def test_a_master_killed_and_restarted_is_used_again(cluster: RedisCluster, caplog) -> None:
    # Last in the file: it takes one master away. Without persistence (as in these tests) the master comes
    # back empty, like a single redis-server; what is remembered while it is down is written once it is back.
    node = cluster.nodes[-1]  # not the first named in the URL, which the client asks by default
    tenant = tenant_on(cluster, node)
    store = RedisClusterStore(cluster.url(), ttl_seconds=60, max_entries=100)
    # The guard's own timeout is out of the way: only the store's failing or hanging can end the recall.
    guarded = GuardedStore(store, recall_timeout=HANG_GUARD, backoff=Backoff(initial=0.05, maximum=0.2))
    assert await guarded.ready()
    node.kill()
    with pytest.raises(RedisConnectionError):
        await store.ready()  # not ready while any master is down, whichever node the client asks by default
    with caplog.at_level(logging.WARNING, logger="toolmend"):
        assert await guarded.recall(tenant, ["call_1"]) == {}
    warnings = [r.getMessage() for r in caplog.records if r.name == "toolmend"]
    # Fast: the refused connection is the failure, not a timeout waited out.
    assert len(warnings) == 1 and "backend=redis-cluster operation=recall error=ConnectionError" in warnings[0], warnings
    assert not guarded.available and not await guarded.ready()
    await guarded.remember(tenant, [turn("call_during")])  # kept for later
    await eventually(lambda: store.failing, "the writer failing to write it")
    node.start()
    await eventually(lambda: guarded.available, "the guard finding the master back")
    assert await store.flush(HANG_GUARD)
    cluster.wait_ok()
    other = RedisClusterStore(cluster.url(), ttl_seconds=60, max_entries=100)
    assert set(await other.recall(tenant, ["call_during"])) == {"call_during"}
    await guarded.remember(tenant, [turn("call_after")])
    assert set(await other.recall(tenant, ["call_during", "call_after"])) == {"call_during", "call_after"}
    await other.close()
    await guarded.close()
