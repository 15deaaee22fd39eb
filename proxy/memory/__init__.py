"""The tool-call memory: one small seam, several stores.

Every store does two things, always scoped to a tenant: ``remember`` the turns an upstream answer made,
and ``recall`` them by any of their call ids. Nothing above this seam knows which store it has; the
store is chosen by URL (``--memory``):

- ``memory://``: in-process, bounded LRU with a time-to-live (``proxy.memory.inprocess``).
- ``sqlite:///path/to/file.db``: a file shared by every worker of one machine, kept across restarts
  (``proxy.memory.sqlite``).
- ``redis://host:port/db`` and ``rediss://``: shared by every replica (``proxy.memory.redis``).
- ``redis+cluster://host:port,host:port`` and ``rediss+cluster://``: the same on a Redis Cluster
  (``proxy.memory.redis_cluster``).

``remember`` returns once the turns are visible to every process sharing the store (``Store`` in
``proxy.memory.protocol``); the shared stores get there with group commits (``proxy.memory.groupcommit``).
The app wraps whichever store it opens in ``proxy.memory.guarded.GuardedStore``, which gives all of them
the same behaviour when the store fails or is slow: requests go on without it.

This module only gathers the names callers use: the protocol (``protocol``), memory URLs (``urls``) and
``open_store`` (``factory``).
"""

from proxy.memory.factory import open_store
from proxy.memory.protocol import RECALL_BATCH, Store, StoreUnavailable, batches
from proxy.memory.urls import SCHEMES, check_url, default_url, redact, redis_nodes, sqlite_path

__all__ = ["RECALL_BATCH", "SCHEMES", "Store", "StoreUnavailable", "batches", "check_url", "default_url", "open_store",
           "redact", "redis_nodes", "sqlite_path"]
