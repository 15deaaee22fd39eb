"""``redis+cluster://host:port[,host:port...]`` and ``rediss+cluster://`` (TLS): the Redis store on a Redis Cluster,
as managed Redis at scale runs (ElastiCache, Memorystore, Azure Cache in cluster mode).

A cluster spreads keys over 16,384 hash slots, and a script or multi-key command may only touch keys of
one slot. The store is ``proxy.memory.redis``'s, with keys that keep each tenant in one slot: the hash
tag ``{<tenant>}`` is in every key name, so only the part in braces decides the slot (tenant ids are hex
digests, ``proxy.tenant``: never a brace in them):

- ``toolmend:{<tenant>}:t:<digest>`` and ``toolmend:{<tenant>}:i:<call id>``: the turn once and each call
  id's pointer to it, as on a single server; a recall is still one ``MGET`` of ids and one of turns.
- ``toolmend:turns:{<tenant>}``: the tenant's turns by time, which keeps at most ``max_entries`` turns *per
  tenant*. One index of every tenant's turns would be one key, in one slot, on one master, touched by
  every write from every tenant: a script could not update it together with the turns, and it would
  make one master do the cluster's bookkeeping. The cluster as a whole is bounded by the time to live
  and by its ``maxmemory`` (every key expires, so a ``volatile-*`` policy may drop turns; docs/memory.md).

A batch from the group commit holds several tenants: it is written as one script call per tenant,
sent to the tenants' masters at once. The client library learns the slot map from the nodes named in the
URL (one is enough; more survive that one being down), follows the cluster when slots move, and is not
asked to retry (the guard backs off instead). Only database 0 exists on a cluster.
"""

import asyncio
from collections import defaultdict
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from proxy.memory.groupcommit import Write
from proxy.memory.redis import MAX_CONNECTIONS, SOCKET_TIMEOUT, RedisStore
from proxy.memory.urls import redis_nodes
from proxy.turns import Turn

REDIS_PORT = 6379  # a node named without a port


class RedisClusterStore(RedisStore):
    backend = "redis-cluster"

    def connect(self, url: str) -> Any:  # RedisCluster: the same commands as redis.asyncio.Redis
        parts = urlsplit(url)
        nodes = [ClusterNode(host, port or REDIS_PORT) for host, port in redis_nodes(parts)]
        # The cluster client opens a connection per command in flight and fails a command past
        # ``max_connections`` at once, where the single server's pool waits: so do the waiting here.
        self._in_flight = asyncio.Semaphore(MAX_CONNECTIONS)
        # redis-py reads credentials, TLS and options from a one-node URL; the others are startup nodes.
        credentials, at, addresses = parts.netloc.rpartition("@")  # a password may hold a comma
        first = credentials + at + addresses.split(",", 1)[0]
        one_node = urlunsplit((parts.scheme.removesuffix("+cluster"), first, parts.path, parts.query, ""))
        return RedisCluster.from_url(
            one_node,
            startup_nodes=nodes,
            max_connections=MAX_CONNECTIONS,  # per node
            socket_connect_timeout=SOCKET_TIMEOUT,
            socket_timeout=SOCKET_TIMEOUT,
            retry=Retry(NoBackoff(), 0),
        )

    def scope(self, tenant: str) -> str:
        return f"{self._prefix}:{{{tenant}}}"

    async def write(self, batch: list[Write]) -> None:
        now = self.clock()
        expired_before = self.expired_before(now)
        by_tenant: defaultdict[str, list[Write]] = defaultdict(list)
        for entry in batch:
            by_tenant[entry.tenant].append(entry)
        # All tenants' scripts are sent; any failure fails the batch, whose retry rewrites the same values.
        await asyncio.gather(*(self.write_indexed(writes, f"{self._prefix}:turns:{{{tenant}}}", now, expired_before)
                               for tenant, writes in by_tenant.items()))

    async def write_indexed(self, batch: list[Write], index: str, now: float, expired_before: float | str) -> None:
        async with self._in_flight:
            await super().write_indexed(batch, index, now, expired_before)

    async def fetch(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        async with self._in_flight:
            return await super().fetch(tenant, ids)

    async def ping(self) -> None:
        async with self._in_flight:
            # Every master, not just one: any of them may hold a request's tenant. (With replicas, a master that
            # failed over is out of the slot map the client reloads after the failure.)
            await self._redis.ping(target_nodes=RedisCluster.PRIMARIES)

    async def disconnect(self) -> None:
        await self._redis.aclose()
