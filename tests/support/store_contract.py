"""What every shared memory backend promises, as tests a backend's test module inherits: above all, that a
remembered turn is in the store, for every other process, once ``remember`` returns.

A subclass provides ``backend`` fixture: a ``Backend`` that opens stores on one shared location (a file,
a Redis database) and lets time pass (a fake clock, or real time for a server that expires keys itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from proxy.memory.groupcommit import GroupCommitStore
from proxy.memory.refusals import refused_among, remember_refused
from proxy.turns import make_turn


def turn(*ids: str, content: str | None = None, arguments: str = "{}"):
    return make_turn([{"id": cid, "type": "function", "function": {"name": "f", "arguments": arguments}} for cid in ids], content)


class Backend:
    def __init__(self, open_store: Callable[..., GroupCommitStore], elapse: Callable[[float], Any]) -> None:
        self._open = open_store
        self.elapse = elapse  # awaitable: let that many seconds pass for the store
        self.opened: list[GroupCommitStore] = []

    def open(self, ttl: float = 60, max_entries: int = 1000) -> GroupCommitStore:
        store = self._open(ttl, max_entries)
        self.opened.append(store)
        return store

    async def close_all(self) -> None:
        for store in self.opened:
            await store.close()


class StoreContract:
    async def test_what_the_upstream_refused_is_seen_by_every_process_of_its_tenant_only(self, backend: Backend) -> None:
        writer, reader = backend.open(), backend.open()
        await remember_refused(writer, "tenant-a/messages", "messages", ["d1", "d2"])
        assert await refused_among(reader, "tenant-a/messages", ["d1", "d3"]) == {"d1"}
        assert await refused_among(reader, "tenant-b/messages", ["d1", "d2"]) == frozenset()

    async def test_recall_by_any_call_id_of_a_turn_in_another_process_once_remember_returns(self, backend: Backend) -> None:
        writer, reader = backend.open(), backend.open()  # two stores on one location: two processes
        await writer.remember("t", [turn("call_1", "call_2", "call_3", content="text", arguments='{"a": 1}')])
        assert writer.pending == 0  # written, not just queued
        found = await reader.recall("t", ["call_3", "call_1", "call_unknown"])
        assert set(found) == {"call_3", "call_1"}
        assert found["call_1"] == found["call_3"] == turn("call_1", "call_2", "call_3", content="text", arguments='{"a": 1}')
        assert list(await writer.recall("t", ["call_2", "call_unknown"])) == ["call_2"]

    async def test_answers_ending_together_share_a_write_and_each_returns_once_it_is_stored(self, backend: Backend) -> None:
        writer, reader = backend.open(), backend.open()
        writes: list[int] = []
        write = writer.write

        async def counted(batch):
            writes.append(len(batch))
            await write(batch)

        async def remember(n: int) -> str:
            await writer.remember("t", [turn(f"call_g{n}")])
            return f"call_g{n}"

        writer.write = counted
        for returned in asyncio.as_completed([remember(n) for n in range(5)]):
            cid = await returned
            assert cid in await reader.recall("t", [cid])  # stored when its remember returned
        assert writes == [5]  # all queued before the writer ran: one batch

    async def test_close_writes_what_is_pending_and_a_new_store_recalls_it(self, backend: Backend) -> None:
        store = backend.open()
        waiting = asyncio.ensure_future(store.remember("t", [turn("call_r1"), turn("call_r2", content="last")]))
        await asyncio.sleep(0)  # queued; the writer has not run yet
        assert store.pending == 1
        await store.close()
        assert waiting.done() and waiting.exception() is None
        again = backend.open()
        assert set(await again.recall("t", ["call_r1", "call_r2"])) == {"call_r1", "call_r2"}

    async def test_tenants_are_isolated(self, backend: Backend) -> None:
        store = backend.open()
        await store.remember("tenant-a", [turn("call_x", content="a")])
        await store.remember("tenant-b", [turn("call_x", content="b")])
        for reader in (store, backend.open()):
            assert (await reader.recall("tenant-a", ["call_x"]))["call_x"]["content"] == "a"
            assert (await reader.recall("tenant-b", ["call_x"]))["call_x"]["content"] == "b"
            assert await reader.recall("tenant-c", ["call_x"]) == {}

    async def test_turns_without_ids_are_not_kept_and_the_latest_turn_wins(self, backend: Backend) -> None:
        store = backend.open()
        await store.remember("t", [make_turn([{"type": "function", "function": {"name": "f", "arguments": "{}"}}])])
        await store.remember("t", [turn("call_1", "call_2", content="old")])
        await store.remember("t", [turn("call_1", "call_3", content="new")])
        found = await backend.open().recall("t", ["call_1", "call_3"])
        assert found["call_1"]["content"] == found["call_3"]["content"] == "new"

    async def test_a_turn_expires_ttl_seconds_after_it_was_remembered(self, backend: Backend) -> None:
        store = backend.open(ttl=0.5)
        await store.remember("t", [turn("call_old")])
        await backend.elapse(0.25)
        await store.remember("t", [turn("call_young")])
        await backend.elapse(0.35)
        assert list(await store.recall("t", ["call_old", "call_young"])) == ["call_young"]
        await backend.elapse(0.25)
        assert await store.recall("t", ["call_young"]) == {}

    async def test_only_the_newest_max_entries_turns_are_kept(self, backend: Backend) -> None:
        store = backend.open(max_entries=3)
        for n in range(5):
            await store.remember("t", [turn(f"call_{n}a", f"call_{n}b")])  # one batch each: the oldest goes first
        await store.remember("t", [turn("call_5a"), turn("call_6a")])  # and within one batch
        found = await backend.open().recall("t", [f"call_{n}{x}" for n in range(7) for x in "ab"])
        assert sorted(found) == ["call_4a", "call_4b", "call_5a", "call_6a"]

    async def test_ready(self, backend: Backend) -> None:
        assert await backend.open().ready()
