"""Write-behind for the shared stores: a remembered turn is visible at once, and written soon, in batches.

``remember`` costs the request nothing but a few dictionary operations: the turn goes into a pending
buffer that this process's ``recall`` reads first, and one background writer drains the buffer into the
store, many turns per transaction or script call. Other processes see a turn once its batch is
written: ``LINGER`` (10 ms) after the first turn of the batch, plus the write itself. A batch that
fails stays queued and is retried with backoff (the buffer is bounded; past the bound the oldest
pending turns are dropped and counted); ``close`` writes whatever is still pending, so a restart loses
nothing that was remembered before it.

A recall that misses in the store looks once more after ``PEER_GRACE`` seconds: another worker or
replica may have answered the previous turn a moment ago and still be writing it. Only requests with
orphan results that are not remembered anywhere pay this, and they are about to have their calls
synthesized, dropped or rejected anyway.
"""

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from proxy.memory.backoff import Backoff
from proxy.memory.protocol import StoreUnavailable, batches
from proxy.turns import Turn, call_ids

log = logging.getLogger("toolmend")

#: Seconds a recall waits before looking again for call ids a peer may still be writing (more than a
#: peer's ``LINGER`` plus its write).
PEER_GRACE = 0.03
#: Most pending writes held while the store is failing; past it the oldest are dropped.
PENDING_LIMIT = 10_000
#: Most writes per batch.
BATCH_LIMIT = 1_000
#: Seconds the writer lets remembered turns gather before writing them as one batch. A batch costs
#: 80-250 us of the proxy's core whatever its size, paid by whichever request it delays: every 10 ms it
#: is shared by many turns (measured: at 1 connection, 2 ms still cost 60-100 us per request).
LINGER = 0.010
#: Seconds between deletions of expired turns (they are never returned before that either).
PRUNE_INTERVAL = 1.0
#: Seconds ``close`` waits for pending writes to reach the store.
FLUSH_TIMEOUT = 5.0


@dataclass(slots=True, eq=False)
class Write:
    """One ``remember`` call: a tenant's turns and when they expire (wall-clock seconds)."""

    tenant: str
    turns: list[Turn]
    expires: float


class WriteBehindStore:
    """Base of the shared stores. Subclasses write batches, fetch by id and ping; this class does the rest."""

    backend = "?"

    def __init__(self, ttl_seconds: float, max_entries: int, clock: Callable[[], float] = time.time) -> None:
        if max_entries < 1 or ttl_seconds <= 0:
            raise ValueError("the memory needs max_entries >= 1 and ttl_seconds > 0")
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self.clock = clock
        self.dropped = 0  # pending writes given up on (buffer full, or still failing at close)
        self.failing: BaseException | None = None  # why the last batch failed, until one succeeds
        self.peer_grace = PEER_GRACE
        self.linger = LINGER
        self.flush_timeout = FLUSH_TIMEOUT
        self.pruned_at = float("-inf")  # when the writer last deleted expired turns
        self._queue: deque[Write] = deque()
        self._pending: dict[tuple[str, str], tuple[Write, Turn]] = {}
        self._writer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._backoff = Backoff()

    # --- what subclasses provide --------------------------------------------------------------------

    async def write(self, batch: list[Write]) -> None:
        """Write every turn of ``batch`` durably, in one transaction or round trip; raise on failure."""
        raise NotImplementedError

    async def fetch(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        """The stored, unexpired turns of ``ids`` (at most ``RECALL_BATCH``; absent ids are left out); raise
        on failure."""
        raise NotImplementedError

    async def ping(self) -> None:
        """Raise unless the store answers."""
        raise NotImplementedError

    async def disconnect(self) -> None:
        """Release connections and threads; pending writes are already flushed."""

    # --- the Store protocol ---------------------------------------------------------------------------

    async def remember(self, tenant: str, turns: list[Turn]) -> None:
        entry = Write(tenant, turns, self.clock() + self.ttl_seconds)
        self._queue.append(entry)
        for turn in turns:
            for cid in call_ids(turn):
                self._pending[(tenant, cid)] = (entry, turn)
        while len(self._queue) > PENDING_LIMIT:
            self._forget(self._queue.popleft())
            self.dropped += 1
        self._idle.clear()
        self._wake.set()
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._drain(), name=f"toolmend-{self.backend}-writer")
        if self.failing is not None:
            # Kept for the retry, but the caller must learn the store is not taking writes.
            raise StoreUnavailable(f"writes are failing: {type(self.failing).__name__}: {self.failing}")

    async def recall(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        found = self._lookup_pending(tenant, ids)
        missing = [cid for cid in ids if cid not in found]
        if missing:
            found.update(await self._fetch_in_batches(tenant, missing))
            missing = [cid for cid in missing if cid not in found]
            if missing and self.peer_grace > 0:
                await asyncio.sleep(self.peer_grace)
                found.update(await self._fetch_in_batches(tenant, missing))
        return found

    async def _fetch_in_batches(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        found: dict[str, Turn] = {}
        for batch in batches(ids):
            found.update(await self.fetch(tenant, batch))
        return found

    async def ready(self) -> bool:
        await self.ping()
        return self.failing is None

    async def close(self) -> None:
        await self.flush(self.flush_timeout)
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
            self._writer = None
        if self._queue:
            log.warning("memory %s: %d remembered turns could not be written before shutdown", self.backend, len(self._queue))
            self.dropped += len(self._queue)
            self._queue.clear()
            self._pending.clear()
        await self.disconnect()

    async def flush(self, timeout: float) -> bool:
        """Wait until everything remembered so far is written; False if that took longer than ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    def prune_due(self, now: float) -> bool:
        """Whether this batch should also delete expired turns (at most every ``PRUNE_INTERVAL`` s)."""
        if now - self.pruned_at < PRUNE_INTERVAL:
            return False
        self.pruned_at = now
        return True

    @property
    def pending(self) -> int:
        return len(self._queue)

    # --- the writer -----------------------------------------------------------------------------------

    async def _drain(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                await self._wake.wait()
                self._wake.clear()
            if len(self._queue) < BATCH_LIMIT:
                await asyncio.sleep(self.linger)  # also between batches: a write per request would cost far more
            batch = [self._queue.popleft() for _ in range(min(len(self._queue), BATCH_LIMIT))]
            if not batch:
                continue
            try:
                await self.write(batch)
            except asyncio.CancelledError:
                self._queue.extendleft(reversed(batch))
                raise
            except Exception as exc:  # noqa: BLE001 - any store error: keep the batch, back off, retry
                self._queue.extendleft(reversed(batch))
                self.failing = exc
                delay = self._backoff.next_delay()
                log.debug("memory %s: writing %d turns failed (%s: %s); retrying in %.2f s",
                          self.backend, len(batch), type(exc).__name__, exc, delay)
                await asyncio.sleep(delay)
                continue
            self.failing = None
            self._backoff.reset()
            for entry in batch:
                self._forget(entry)

    def _forget(self, entry: Write) -> None:
        for turn in entry.turns:
            for cid in call_ids(turn):
                key = (entry.tenant, cid)
                held = self._pending.get(key)
                if held is not None and held[0] is entry:
                    del self._pending[key]

    def _lookup_pending(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        if not self._pending:
            return {}
        now = self.clock()
        found: dict[str, Turn] = {}
        for cid in ids:
            held = self._pending.get((tenant, cid))
            if held is not None and held[0].expires > now:
                found[cid] = held[1]
        return found
