"""The tool-call memory: one small seam, several stores.

Every store does two things, always scoped to a tenant: ``remember`` the turns an upstream answer made,
and ``recall`` them by any of their call ids. Nothing above this seam knows which store it has; the
store is chosen by URL (``--memory``):

- ``memory://``: in-process, bounded LRU with a time-to-live (``proxy.memory.inprocess``).
"""

from typing import Protocol
from urllib.parse import urlsplit

from proxy.turns import Turn


class Store(Protocol):
    backend: str

    async def remember(self, tenant: str, turns: list[Turn]) -> None: ...

    async def recall(self, tenant: str, ids: list[str]) -> dict[str, Turn]: ...

    async def ready(self) -> bool: ...

    async def close(self) -> None: ...


SCHEMES = ("memory",)


def open_store(url: str, ttl_seconds: float, max_entries: int) -> Store:
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        from proxy.memory.inprocess import InProcessStore

        return InProcessStore(ttl_seconds=ttl_seconds, max_entries=max_entries)
    raise ValueError(f"unsupported memory URL {url!r}: use one of {', '.join(s + '://' for s in SCHEMES)}")
