"""What the upstream refused, remembered per memory scope (``proxy/memory/refusals.py``): digests kept in the store as
records no call id looks like, bounded per record, per scope; and the process's bounded, expiring list of the scopes
that have any. The shared backends run the same record test through ``tests/support/store_contract.py``."""

from __future__ import annotations

from proxy.memory.inprocess import InProcessStore
from proxy.memory.refusals import MAX_DIGESTS, Noted, refused_among, remember_refused


async def test_refused_digests_are_recalled_per_scope_and_apart_from_call_ids() -> None:
    store = InProcessStore(ttl_seconds=60, max_entries=100)
    await remember_refused(store, "a/messages", "messages", [f"d{n}" for n in range(MAX_DIGESTS + 5)])
    assert await refused_among(store, "a/messages", ["d0", f"d{MAX_DIGESTS - 1}", f"d{MAX_DIGESTS}"]) == {"d0", f"d{MAX_DIGESTS - 1}"}
    assert await refused_among(store, "b/messages", ["d0"]) == frozenset()
    assert await store.recall("a/messages", ["d0"]) == {}  # a call id that happens to equal a digest finds nothing
    await remember_refused(store, "a/messages", "messages", [])
    assert len(store) == 1  # nothing to remember: no record


def test_noted_scopes_expire_and_are_bounded() -> None:
    now = [0.0]
    noted = Noted(ttl_seconds=10, max_scopes=2, clock=lambda: now[0])
    noted.note("a")
    noted.note("b")
    assert noted.has("a") and noted.has("b") and not noted.has("c")
    noted.note("c")  # the least recently noted goes
    assert not noted.has("a") and noted.has("c")
    now[0] = 10.0
    assert not noted.has("b") and not noted.has("c")
