"""``redis://host:port/db`` and ``rediss://`` (TLS): one memory for every replica behind a load balancer.

Keys, all under ``toolmend:``:

- ``toolmend:<tenant>:t:<digest>``: the turn (orjson), once, whatever its number of call ids; the digest is
  of the index member below (the tenant and the turn's ids), so a turn with the same ids replaces it.
- ``toolmend:<tenant>:i:<call id>``: the digest of the turn that declared the call, one key per call id. A
  recall is one ``MGET`` of these per ``RECALL_BATCH`` ids, then one ``MGET`` of the turns they name (none
  when no id is known). The server expires every key ``ttl_seconds`` after the turn was last remembered
  (``SET ... PX``).
- ``toolmend:turns``: a sorted set of the remembered turns by time (``[tenant, ids]``), to keep at most
  ``max_entries`` of them: when a batch takes it over the bound, the oldest turns and their keys are deleted.

The first layout kept the whole turn under ``toolmend:<tenant>:<call id>``, once per call id (a turn's size
times its ids). Those keys are not read: they expire within ``ttl_seconds``, and in a rolling upgrade a
call one version remembered is unknown to the other (as if forgotten), never misread.

Writes go through the group commit (``proxy.memory.groupcommit``): each batch of remembered
turns is one ``EVALSHA`` of a short script that runs the batch's ``SET``s and ``ZADD``s on the server,
atomically, in one round trip (a pipeline of the same commands costs the proxy several times the CPU per
turn, in redis-py's packing and reply parsing). Connections are pooled (``MAX_CONNECTIONS``);
commands are never retried by the client library (the guard backs off instead), and connecting or
answering is bounded by ``SOCKET_TIMEOUT``. Both can be changed with URL query parameters redis-py
understands, e.g. ``?socket_timeout=2``. ``proxy.memory.redis_cluster`` is this store on a Redis Cluster:
its own client, key names and index per tenant.
"""

import hashlib
import time
from collections.abc import Callable
from typing import cast

import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.typing import EncodableT

from proxy.memory.groupcommit import GroupCommitStore, Write
from proxy.turns import Turn, call_ids

PREFIX = "toolmend"

#: One batch of turns in one round trip, atomically. KEYS: the index, then per turn its call ids' keys and
#: its turn key. ARGV: ttl in ms, now, the time before which index entries have expired (or "" to leave
#: them), then per turn: its number of call ids, its index member, the turn, its digest. Returns the
#: index's size.
REMEMBER_BATCH = """
local key, i = 2, 4
while i <= #ARGV do
  for _ = 1, tonumber(ARGV[i]) do
    redis.call('SET', KEYS[key], ARGV[i + 3], 'PX', ARGV[1])
    key = key + 1
  end
  redis.call('SET', KEYS[key], ARGV[i + 2], 'PX', ARGV[1])
  key = key + 1
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[i + 1])
  i = i + 4
end
if ARGV[3] ~= '' then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return redis.call('ZCARD', KEYS[1])
"""

MAX_CONNECTIONS = 64
SOCKET_TIMEOUT = 1.0


class RedisStore(GroupCommitStore):
    backend = "redis"

    def __init__(self, url: str, ttl_seconds: float, max_entries: int, clock: Callable[[], float] = time.time,
                 prefix: str = PREFIX) -> None:
        super().__init__(ttl_seconds, max_entries, clock)
        self._redis = self.connect(url)
        self._prefix = prefix
        self._ttl_ms = max(1, round(ttl_seconds * 1000))
        self._remember_batch = self._redis.register_script(REMEMBER_BATCH)

    def connect(self, url: str) -> aioredis.Redis:
        """The client, on a pool of connections to the one server."""
        self._pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            timeout=SOCKET_TIMEOUT,  # waiting for a free pooled connection
            socket_connect_timeout=SOCKET_TIMEOUT,
            socket_timeout=SOCKET_TIMEOUT,
            retry=Retry(NoBackoff(), 0),
        )
        return aioredis.Redis(connection_pool=self._pool)

    def scope(self, tenant: str) -> str:
        """What every key of ``tenant`` starts with."""
        return f"{self._prefix}:{tenant}"

    def key(self, tenant: str, call_id: str) -> str:
        return f"{self.scope(tenant)}:i:{call_id}"

    def turn_key(self, tenant: str, digest: str) -> str:
        return f"{self.scope(tenant)}:t:{digest}"

    async def write(self, batch: list[Write]) -> None:
        now = self.clock()
        await self.write_indexed(batch, f"{self._prefix}:turns", now, self.expired_before(now))

    def expired_before(self, now: float) -> float | str:
        """The script's ARGV[3]: index entries older than this have expired ("" when no pruning is due)."""
        return now - self.ttl_seconds if self.prune_due(now) else ""

    async def write_indexed(self, batch: list[Write], index: str, now: float, expired_before: float | str) -> None:
        """Write ``batch`` in one script call that also adds its turns to the sorted set ``index``, then delete
        the oldest turns of ``index`` beyond ``max_entries``."""
        keys: list[str] = [index]
        args: list[EncodableT] = [self._ttl_ms, now, expired_before]
        for entry in batch:
            for turn in entry.turns:
                ids = call_ids(turn)
                if ids:
                    member = orjson.dumps([entry.tenant, ids])
                    digest = _digest(member)
                    keys += [self.key(entry.tenant, cid) for cid in ids]
                    keys.append(self.turn_key(entry.tenant, digest))
                    args += [len(ids), member, orjson.dumps(turn), digest]
        if len(keys) == 1:
            return
        over = await self._remember_batch(keys=keys, args=args) - self.max_entries
        if over > 0:
            await self._evict_oldest(index, over)

    async def _evict_oldest(self, index: str, count: int) -> None:
        # ZPOPMIN always answers (member, score) pairs: members as bytes, or text under ``?decode_responses=true``.
        oldest = cast(list[tuple[bytes | str, float]], await self._redis.zpopmin(index, count))
        keys: list[str] = []
        for member, _ in oldest:
            tenant, ids = orjson.loads(member)
            keys += [self.key(tenant, cid) for cid in ids]
            keys.append(self.turn_key(tenant, _digest(_bytes(member))))
        if keys:
            await self._redis.delete(*keys)

    async def fetch(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        digests: list[bytes | str | None] = await self._redis.mget([self.key(tenant, cid) for cid in ids])
        known = {cid: _text(digest) for cid, digest in zip(ids, digests, strict=True) if digest is not None}
        if not known:
            return {}
        wanted = list(dict.fromkeys(known.values()))  # the ids of one turn share one fetched, parsed turn
        blobs = await self._redis.mget([self.turn_key(tenant, digest) for digest in wanted])
        turns = {digest: orjson.loads(blob) for digest, blob in zip(wanted, blobs, strict=True) if blob is not None}
        # An id whose turn went in between (evicted, expired) is absent, as its own key would be a moment later.
        return {cid: turns[digest] for cid, digest in known.items() if digest in turns}

    async def ping(self) -> None:
        await self._redis.ping()

    async def disconnect(self) -> None:
        await self._redis.aclose()
        await self._pool.disconnect()


def _bytes(reply: bytes | str) -> bytes:
    """A reply as bytes: redis-py answers text instead under ``?decode_responses=true``, which the URL may set."""
    return reply.encode() if isinstance(reply, str) else reply


def _text(reply: bytes | str) -> str:
    return reply.decode() if isinstance(reply, bytes) else reply


def _digest(member: bytes) -> str:
    """A turn key's last part: the digest of its index member, so the member alone names every key of the turn."""
    return hashlib.blake2b(member, digest_size=16).hexdigest()
