"""The same failure behaviour for every store: the proxy serves on when its memory is down.

``GuardedStore`` wraps whichever store the app opened. When the store fails (an error, a recall slower
than ``RECALL_TIMEOUT`` per ``RECALL_BATCH`` ids, or a remember slower than ``REMEMBER_TIMEOUT``):

- recall returns nothing, so orphan results follow ``--orphan-policy``; remember failures are swallowed,
  and a remember is waited for no longer than ``REMEMBER_TIMEOUT``, so the answer whose end waits on it
  is delayed by at most that (the shared stores keep the turns and retry them on their own);
- ``available`` turns False, which puts ``x-toolmend-memory: unavailable`` on responses, and
  ``/readyz`` says ``degraded``; one warning is logged, and ``failures`` counts every failed operation;
- recalls are not even tried while the store is down (``skipped`` counts them), and remembers are handed
  to the store but not waited for: answers do not count on a store that is down; a background probe
  asks the store's ``ready`` with exponential backoff (0.2 s doubling to 10 s), never on every request.
  When it answers, the store is used again and an info line says so.

``report`` hears every change of ``available`` (and the state at start): the app passes
``Metrics.memory_health``, which sets ``toolmend_memory_up``.
"""

import asyncio
import logging
import math
import time
from collections.abc import Callable

from proxy.memory.backoff import Backoff
from proxy.memory.inprocess import InProcessStore
from proxy.memory.protocol import RECALL_BATCH, Store
from proxy.turns import Turn

log = logging.getLogger("toolmend")

#: Seconds a recall may take per ``RECALL_BATCH`` ids before the request goes on without it (and the store
#: counts as down).
RECALL_TIMEOUT = 1.0
#: Seconds an answer's end waits for the store to have its turns before it goes out anyway (and the store
#: counts as down). A ``remember`` waits for at most two writes (the batch in flight, then its own), and a
#: write of a well store takes milliseconds at most (bench/README.md, "Store writes"): only a failing or
#: overloaded store gets near it. The same bound as a recall's: the slowest the store may be before the proxy
#: serves without it.
REMEMBER_TIMEOUT = RECALL_TIMEOUT


class GuardedStore:
    def __init__(self, store: Store, recall_timeout: float = RECALL_TIMEOUT, backoff: Backoff | None = None,
                 report: Callable[[str, bool], None] | None = None, remember_timeout: float = REMEMBER_TIMEOUT,
                 counted: Callable[[str, str, int], None] | None = None) -> None:
        self.store = store
        self.backend = store.backend
        self.recall_timeout = recall_timeout
        self.remember_timeout = remember_timeout
        self.failures = 0  # operations that failed
        self.skipped = 0  # recalls not tried because the store was down
        self._backoff = backoff or Backoff()
        self._down_since: float | None = None
        self._probe: asyncio.Task[None] | None = None
        self._report = report or (lambda backend, up: None)
        self._report(self.backend, True)
        self._counted = counted or (lambda backend, result, ids: None)
        for result in ("hit", "miss"):  # both series exist from the start: a recall then counts only what it found or missed
            self._counted(self.backend, result, 0)
        # The in-process store itself (a subclass may wait) never waits: each of its operations is done at its first
        # step, before any timeout could fire, so it is called without one (a timer per operation spared), its recall
        # not even awaited.
        self._in_process = store if type(store) is InProcessStore else None

    @property
    def available(self) -> bool:
        return self._down_since is None

    async def recall(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        """The remembered turns of ``ids`` (none while the store is down); ``counted`` hears how many ids were
        found (``hit``), not found (``miss``), or not looked up because the store failed or is down (``error``)."""
        found: dict[str, Turn] = {}
        if self._down_since is not None:
            self.skipped += 1
        else:
            try:
                found = self._in_process.recalled(tenant, ids) if self._in_process is not None else await self._recall(tenant, ids)
            except Exception as exc:  # noqa: BLE001 - whatever the backend raises, the request goes on
                self._failed("recall", exc)
        if self._down_since is None:
            if found:
                self._counted(self.backend, "hit", len(found))
            if len(found) < len(ids):
                self._counted(self.backend, "miss", len(ids) - len(found))
        else:
            self._counted(self.backend, "error", len(ids))
        return found

    async def _recall(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        # A store looks ids up ``RECALL_BATCH`` at a time, and each batch gets the whole timeout: a request
        # with a great many ids takes its time, but does not make the store look slow to everyone else.
        async with asyncio.timeout(self.recall_timeout * max(1, math.ceil(len(ids) / RECALL_BATCH))):
            return await self.store.recall(tenant, ids)

    async def remember(self, tenant: str, turns: list[Turn]) -> None:
        # While the store is down the turns are still handed over (a store takes them before it first waits,
        # and writes them when it can), but not waited for: a bound of 0 ends the wait at its first pause.
        down = self._down_since is not None
        bound = None if self._in_process is not None else asyncio.timeout(0 if down else self.remember_timeout)
        try:
            if bound is None:
                await self.store.remember(tenant, turns)
            else:
                async with bound:
                    await self.store.remember(tenant, turns)
        except Exception as exc:  # noqa: BLE001 - whatever the backend raises, the answer is relayed on
            if not (down and bound is not None and bound.expired()):  # not waiting while down is no new failure
                self._failed("remember", exc)

    async def ready(self) -> bool:
        if self._down_since is not None:
            return False  # the probe finds out when it is back
        try:
            async with asyncio.timeout(self.recall_timeout):
                if await self.store.ready():
                    return True
            self._failed("ready", None)
        except Exception as exc:  # noqa: BLE001 - any failure means "not ready"; the guard reports it
            self._failed("ready", exc)
        return False

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)
            self._probe = None
        try:
            await self.store.close()
        except Exception as exc:  # noqa: BLE001 - shutting down: say so, do not crash the shutdown
            log.warning("memory store %s did not close cleanly: %s: %s", self.backend, type(exc).__name__, exc)

    def _failed(self, operation: str, exc: BaseException | None) -> None:
        self.failures += 1
        reason = "not ready" if exc is None else f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if self._down_since is not None:
            log.debug("memory store %s still unavailable (%s): %s", self.backend, operation, reason)
            return
        self._down_since = time.monotonic()
        self._report(self.backend, False)
        log.warning("memory store unavailable backend=%s operation=%s error=%s; serving without it "
                    "(orphan results follow the orphan policy) and retrying with backoff", self.backend, operation, reason)
        self._probe = asyncio.get_running_loop().create_task(self._probe_until_back(), name="toolmend-memory-probe")

    async def _probe_until_back(self) -> None:
        while True:
            await self._backoff.wait()
            try:
                async with asyncio.timeout(self.recall_timeout):
                    if await self.store.ready():
                        break
            except Exception as exc:  # noqa: BLE001 - the probe's job is to try again, whatever the failure
                log.debug("memory store %s probe failed: %s: %s", self.backend, type(exc).__name__, exc)
        down_for = time.monotonic() - (self._down_since or time.monotonic())
        self._down_since = None
        self._report(self.backend, True)
        self._backoff.reset()
        self._probe = None
        log.info("memory store available again backend=%s after %.1f s", self.backend, down_for)
