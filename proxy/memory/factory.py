"""``open_store``: the store a memory URL names. Each backend is imported only when it is chosen, so a proxy
on ``memory://`` or SQLite never loads redis-py."""

from urllib.parse import urlsplit

from proxy.memory.protocol import Store
from proxy.memory.urls import SCHEMES, redact, sqlite_path


def open_store(url: str, ttl_seconds: float, max_entries: int) -> Store:
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        from proxy.memory.inprocess import InProcessStore

        return InProcessStore(ttl_seconds=ttl_seconds, max_entries=max_entries)
    if scheme == "sqlite":
        from proxy.memory.sqlite import SqliteStore

        return SqliteStore(sqlite_path(url), ttl_seconds=ttl_seconds, max_entries=max_entries)
    if scheme in ("redis", "rediss"):
        from proxy.memory.redis import RedisStore

        return RedisStore(url, ttl_seconds=ttl_seconds, max_entries=max_entries)
    if scheme in ("redis+cluster", "rediss+cluster"):
        from proxy.memory.redis_cluster import RedisClusterStore

        return RedisClusterStore(url, ttl_seconds=ttl_seconds, max_entries=max_entries)
    raise ValueError(f"unsupported memory URL {redact(url)!r}: use one of {', '.join(s + '://' for s in SCHEMES)}")
