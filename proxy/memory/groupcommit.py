"""Group commit for the shared stores: ``remember`` returns once its turns are written, and answers that
end together share one write.

Read your writes, across processes: a fast agent (instant tools) sends its next request the moment an
answer ends, and a load balancer may send it to another worker or replica. So ``remember`` returns only
once the turns are committed to the file or stored on the server, and the relay lets the answer's last
byte go only then (``proxy.relay``).

One writer per process does the writes. It takes everything queued, writes it in one transaction or
script call, wakes the ``remember`` calls of that batch, and at once takes whatever queued meanwhile: no
linger. A turn remembered on an idle store is written at once, and under load a batch grows by itself
with the time a write takes, so the cost per write is shared by every answer that ended during the one
before. Nobody waits for more than the batch in flight and its own (below ``BATCH_LIMIT`` turns queued).

A recall that misses in the store does not look again a moment later as if a peer could still be writing:
another process's turn is in the store before its answer ended, so before any request that answers it can
have been sent (unless the guard stopped waiting for a store slower than its bound, which then counts as
down).

Until its batch is written a turn is also held in a pending buffer that this process's ``recall`` reads
first: this process sees it at once, even while the store is failing or slower than the guard lets an
answer wait (``proxy.memory.guarded``). A batch that fails fails the ``remember`` calls waiting on it
(``StoreUnavailable``: the guard lets their answers go on) but stays queued and is retried with
backoff; while writes are failing, ``remember`` queues its turns and raises at once instead of waiting.
The queue is bounded (past the bound the oldest pending turns are dropped and counted); ``close`` writes
whatever is still pending, so a restart loses nothing that was remembered before it.
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

#: Most pending writes held while the store is failing; past it the oldest are dropped.
PENDING_LIMIT = 10_000
#: Most writes per batch: one transaction or script call of 1,000 turns takes a few milliseconds, and holds
#: the SQLite write lock or the Redis server that long.
BATCH_LIMIT = 1_000
#: Seconds between deletions of expired turns (they are never returned before that either).
PRUNE_INTERVAL = 1.0
#: Seconds ``close`` waits for pending writes to reach the store.
FLUSH_TIMEOUT = 5.0


@dataclass(slots=True, eq=False)
class Write:
    """One ``remember`` call: a tenant's turns, when they expire (wall-clock seconds), and, while that call
    waits, the future its batch settles: None once written, else why the write failed."""

    tenant: str
    turns: list[Turn]
    expires: float
    written: asyncio.Future[BaseException | None] | None = None


class GroupCommitStore:
    """Base of the shared stores. Subclasses write batches, fetch by id and ping; this class does the rest."""

    backend = "?"

    def __init__(self, ttl_seconds: float, max_entries: int, clock: Callable[[], float] = time.time) -> None:
        if max_entries < 1 or ttl_seconds <= 0:
            raise ValueError("the memory needs max_entries >= 1 and ttl_seconds > 0")
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self.clock = clock
        self.dropped = 0  # pending writes given up on (queue full, or still failing at close)
        self.failing: BaseException | None = None  # why the last batch failed, until one succeeds
        self.flush_timeout = FLUSH_TIMEOUT
        self.pruned_at = float("-inf")  # when the writer last deleted expired turns
        self._queue: deque[Write] = deque()
        self._batch: list[Write] = []  # the batch being written
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
        expires = self.clock() + self.ttl_seconds
        failing = self.failing
        if failing is not None:
            # Kept for the retry, but not waited for: the writer is backing off, and the caller must learn now.
            self._enqueue(Write(tenant, turns, expires))
            raise StoreUnavailable(f"writes are failing: {_why(failing)}")
        written: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        self._enqueue(Write(tenant, turns, expires, written))
        error = await written
        if error is not None:
            raise StoreUnavailable(f"the write failed: {_why(error)}") from error

    async def recall(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        found = self._lookup_pending(tenant, ids)
        missing = [cid for cid in ids if cid not in found]
        for batch in batches(missing):
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
            for entry in self._queue:
                _settle(entry, StoreUnavailable("the store closed before writing it"))
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

    def prune_due(self, now: float, claim: bool = True) -> bool:
        """Whether this batch should also delete expired turns (at most every ``PRUNE_INTERVAL`` s); unless
        ``claim`` is False (only asking), the batch that is told so is the one that deletes them."""
        if now - self.pruned_at < PRUNE_INTERVAL:
            return False
        if claim:
            self.pruned_at = now
        return True

    @property
    def pending(self) -> int:
        """Writes queued and not yet written (the batch being written included)."""
        return len(self._queue) + len(self._batch)

    # --- the writer -----------------------------------------------------------------------------------

    async def _drain(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                await self._wake.wait()
                self._wake.clear()
                continue
            batch = self._batch = [self._queue.popleft() for _ in range(min(len(self._queue), BATCH_LIMIT))]
            try:
                await self.write(batch)
            except asyncio.CancelledError:
                self._requeue(batch)
                raise
            except Exception as exc:  # noqa: BLE001 - any store error: keep the batch, back off, retry
                self._requeue(batch)
                self.failing = exc
                for entry in batch:
                    _settle(entry, exc)
                delay = self._backoff.next_delay()
                log.debug("memory %s: writing %d turns failed (%s); retrying in %.2f s", self.backend, len(batch), _why(exc), delay)
                await asyncio.sleep(delay)
                continue
            self._batch = []
            self.failing = None
            self._backoff.reset()
            for entry in batch:
                self._forget(entry)
                _settle(entry, None)

    def _enqueue(self, entry: Write) -> None:
        self._queue.append(entry)
        for turn in entry.turns:
            for cid in call_ids(turn):
                self._pending[(entry.tenant, cid)] = (entry, turn)
        while len(self._queue) > PENDING_LIMIT:
            dropped = self._queue.popleft()
            self._forget(dropped)
            _settle(dropped, StoreUnavailable("dropped: too many turns waiting for the store"))
            self.dropped += 1
        self._idle.clear()
        self._wake.set()
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._drain(), name=f"toolmend-{self.backend}-writer")

    def _requeue(self, batch: list[Write]) -> None:
        """Put a batch that was not written back at the head of the queue, for the next attempt."""
        self._batch = []
        self._queue.extendleft(reversed(batch))

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


def _settle(entry: Write, error: BaseException | None) -> None:
    """Tell the ``remember`` call waiting on ``entry`` how its write went, if it still waits (the guard may
    have stopped waiting, which cancels the future; and a retried write has no waiter left)."""
    if entry.written is not None and not entry.written.done():
        entry.written.set_result(error)
    entry.written = None


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
