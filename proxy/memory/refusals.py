"""What the upstream refused, remembered per memory scope: the digests of the signatures and encrypted blobs a retry
left out (``proxy/dialects/refusal.py``), so that later requests leave them out before they are sent.

They are kept in the memory store itself, whichever backend (shared by every worker and replica, bounded and expiring
as the store's turns are): one record a refusal, a turn with no content recalled by ``refused:<digest>``, at most
``MAX_DIGESTS`` of them. Every store keeps a turn once however many ids recall it, so a record costs bytes linear in
its digests. ``Noted`` is this process's bounded list of the scopes that have such records, so that a
request of any other scope (nearly all) asks the store nothing: a worker that has not seen a scope's refusal yet
learns of it on its own first refused round trip.
"""

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from proxy.memory.protocol import Store
from proxy.turns import Dialect, Turn

#: What a refused digest is recalled by; no call id the proxy remembers looks like it.
PREFIX = "refused:"
#: Most digests one refusal record keeps (a request that carried more is refused once more for the rest).
MAX_DIGESTS = 1024
#: Most scopes a process notes as having refusals remembered (the least recently noted goes first).
MAX_SCOPES = 10_000


def key(digest: str) -> str:
    return PREFIX + digest


async def refused_among(store: Store, scope: str, digests: Iterable[str]) -> frozenset[str]:
    """Which of ``digests`` the upstream refused before in ``scope`` (none when the store cannot tell)."""
    found = await store.recall(scope, [key(digest) for digest in dict.fromkeys(digests)])
    return frozenset(found_key[len(PREFIX):] for found_key in found)


async def remember_refused(store: Store, scope: str, dialect: Dialect, digests: Iterable[str]) -> None:
    """Keep ``digests`` as refused in ``scope`` (the first ``MAX_DIGESTS`` of them)."""
    ids = [key(digest) for digest in dict.fromkeys(digests)][:MAX_DIGESTS]
    if ids:
        record: Turn = {"dialect": dialect, "ids": ids}
        await store.remember(scope, [record])


class Noted:
    """The scopes this process saw a refusal remembered in, each for ``ttl_seconds`` (the store's own bound), at most
    ``max_scopes``."""

    def __init__(self, ttl_seconds: float, max_scopes: int = MAX_SCOPES, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_scopes = max_scopes
        self._clock = clock
        self._until: OrderedDict[str, float] = OrderedDict()

    def note(self, scope: str) -> None:
        self._until.pop(scope, None)
        self._until[scope] = self._clock() + self.ttl_seconds
        while len(self._until) > self.max_scopes:
            self._until.popitem(last=False)

    def has(self, scope: str) -> bool:
        until = self._until.get(scope)
        if until is None:
            return False
        if until <= self._clock():
            del self._until[scope]
            return False
        return True
