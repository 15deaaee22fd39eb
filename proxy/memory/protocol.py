"""What every memory store promises (``Store``), and the bound on one look-up that they all keep."""

from typing import Protocol

from proxy.turns import Turn


class Store(Protocol):
    backend: str

    async def remember(self, tenant: str, turns: list[Turn]) -> None:
        """Keep ``turns`` for ``tenant``. Returns once they are durable and visible to every process that shares
        the store (read your writes: the relay lets the last byte of the answer that carried them go only
        then, so a client's next request finds them on whichever worker or replica it lands). Raises
        ``StoreUnavailable`` (or whatever the backend raises) when it cannot keep that promise now; a store
        that retries on its own still has the turns."""
        ...

    async def recall(self, tenant: str, ids: list[str]) -> dict[str, Turn]:
        """The remembered turns of ``ids`` (by any of their call ids); absent ids are left out."""
        ...

    async def ready(self) -> bool: ...

    async def close(self) -> None: ...


#: Most call ids a store looks up in one query or command. A request may carry hundreds of thousands of
#: ids; looked up at once they exceed SQLite's bound on a statement's variables (32,766; 999 before 3.32)
#: and hold a Redis server in one command. The guard's recall timeout applies per batch.
RECALL_BATCH = 500


def batches(ids: list[str]) -> list[list[str]]:
    """``ids`` in slices of at most ``RECALL_BATCH``."""
    return [ids[start : start + RECALL_BATCH] for start in range(0, len(ids), RECALL_BATCH)]


class StoreUnavailable(Exception):
    """The store cannot be used right now (its writes are failing); raised by ``remember``."""
