"""``memory://``: the in-process store. Fast, bounded, and gone when the process exits.

Entries are whole turns, found by any of their call ids. The store holds at most ``max_entries`` turns
(the least recently used goes first) and forgets a turn ``ttl_seconds`` after it was last remembered.
"""

import time
from collections import OrderedDict
from collections.abc import Callable

from proxy.turns import Turn, call_ids

TurnKey = tuple[str, str]  # (tenant, first call id of the turn)


class InProcessStore:
    backend = "memory"

    def __init__(self, ttl_seconds: float, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1 or ttl_seconds <= 0:
            raise ValueError("the memory needs max_entries >= 1 and ttl_seconds > 0")
        self.ttl_seconds = ttl_seconds
        self.max_entries = max_entries
        self._clock = clock
        self._turns: OrderedDict[TurnKey, tuple[float, Turn]] = OrderedDict()
        self._index: dict[tuple[str, str], TurnKey] = {}

    def __len__(self) -> int:
        return len(self._turns)

    async def remember(self, tenant: str, turns: list[Turn]) -> None:
        expires = self._clock() + self.ttl_seconds
        for turn in turns:
            ids = call_ids(turn)
            if not ids:
                continue
            key = (tenant, ids[0])
            self._forget(key)
            self._turns[key] = (expires, turn)
            for cid in ids:
                self._index[(tenant, cid)] = key
        while len(self._turns) > self.max_entries:
            self._forget(next(iter(self._turns)))

    async def recall(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        return self.recalled(tenant, ids)

    def recalled(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        """``recall``, done at once: the in-process store never waits."""
        now = self._clock()
        found: dict[str, Turn] = {}
        for cid in ids:
            key = self._index.get((tenant, cid))
            entry = self._turns.get(key) if key is not None else None
            if key is None or entry is None:
                continue
            if entry[0] <= now:
                self._forget(key)
                continue
            self._turns.move_to_end(key)
            found[cid] = entry[1]
        return found

    async def ready(self) -> bool:
        return True

    async def close(self) -> None:
        self._turns.clear()
        self._index.clear()

    def _forget(self, key: TurnKey) -> None:
        entry = self._turns.pop(key, None)
        if entry is None:
            return
        for cid in call_ids(entry[1]):
            if self._index.get((key[0], cid)) == key:
                del self._index[(key[0], cid)]
