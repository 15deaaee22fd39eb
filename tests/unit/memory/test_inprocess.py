"""``memory://``: bounded LRU of whole turns, a time-to-live on an injected clock, scoped per tenant."""

import pytest

from proxy.memory import open_store
from proxy.memory.inprocess import InProcessStore
from proxy.turns import make_turn


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def turn(*ids: str, content: str | None = None):
    return make_turn([{"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}} for cid in ids], content)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def store(clock: Clock, ttl: float = 60, max_entries: int = 100) -> InProcessStore:
    return InProcessStore(ttl_seconds=ttl, max_entries=max_entries, clock=clock)


async def test_recall_by_any_call_id_of_a_turn(clock):
    memory = store(clock)
    await memory.remember("t", [turn("call_1", "call_2", "call_3", content="text")])
    found = await memory.recall("t", ["call_3", "call_1", "call_unknown"])
    assert set(found) == {"call_3", "call_1"}
    assert found["call_1"] is found["call_3"]
    assert [c["id"] for c in found["call_1"]["tool_calls"]] == ["call_1", "call_2", "call_3"]
    assert found["call_1"]["content"] == "text"
    assert len(memory) == 1


async def test_tenants_are_isolated(clock):
    memory = store(clock)
    await memory.remember("tenant-a", [turn("call_x", content="a")])
    await memory.remember("tenant-b", [turn("call_x", content="b")])
    assert (await memory.recall("tenant-a", ["call_x"]))["call_x"]["content"] == "a"
    assert (await memory.recall("tenant-b", ["call_x"]))["call_x"]["content"] == "b"
    assert await memory.recall("tenant-c", ["call_x"]) == {}


async def test_turns_without_ids_are_not_kept_and_remembering_again_replaces(clock):
    memory = store(clock)
    await memory.remember("t", [make_turn([{"type": "function", "function": {"name": "f", "arguments": "{}"}}])])
    assert len(memory) == 0
    await memory.remember("t", [turn("call_1", "call_2", content="old")])
    await memory.remember("t", [turn("call_1", "call_3", content="new")])
    assert len(memory) == 1
    assert (await memory.recall("t", ["call_3"]))["call_3"]["content"] == "new"
    assert await memory.recall("t", ["call_2"]) == {}  # the old turn's ids went with it


async def test_lru_bound_evicts_the_least_recently_used_turn(clock):
    memory = store(clock, max_entries=2)
    await memory.remember("t", [turn("call_a")])
    await memory.remember("t", [turn("call_b1", "call_b2")])
    assert await memory.recall("t", ["call_a"])  # a is now more recent than b
    await memory.remember("t", [turn("call_c")])
    assert len(memory) == 2
    assert await memory.recall("t", ["call_b1", "call_b2"]) == {}
    assert set(await memory.recall("t", ["call_a", "call_c"])) == {"call_a", "call_c"}


async def test_lru_bound_holds_within_one_remember_call(clock):
    memory = store(clock, max_entries=2)
    await memory.remember("t", [turn("call_1"), turn("call_2"), turn("call_3")])
    assert len(memory) == 2
    assert set(await memory.recall("t", ["call_1", "call_2", "call_3"])) == {"call_2", "call_3"}


async def test_ttl_counts_from_the_last_remember(clock):
    memory = store(clock, ttl=10)
    await memory.remember("t", [turn("call_1")])
    clock.now += 9.99
    assert await memory.recall("t", ["call_1"])
    clock.now += 0.01
    assert await memory.recall("t", ["call_1"]) == {}
    assert len(memory) == 0  # an expired turn is dropped when found


async def test_recall_does_not_extend_the_ttl_but_remembering_again_does(clock):
    memory = store(clock, ttl=10)
    await memory.remember("t", [turn("call_1"), turn("call_2")])
    clock.now += 5
    assert await memory.recall("t", ["call_1"])
    await memory.remember("t", [turn("call_2")])
    clock.now += 6
    assert await memory.recall("t", ["call_1"]) == {}
    assert await memory.recall("t", ["call_2"])


async def test_close_forgets_everything_and_ready_is_true(clock):
    memory = store(clock)
    await memory.remember("t", [turn("call_1")])
    assert await memory.ready()
    await memory.close()
    assert len(memory) == 0 and await memory.recall("t", ["call_1"]) == {}


@pytest.mark.parametrize(("ttl", "max_entries"), [(0, 10), (-1, 10), (10, 0)])
def test_bad_bounds_are_refused(ttl, max_entries):
    with pytest.raises(ValueError):
        InProcessStore(ttl_seconds=ttl, max_entries=max_entries)


def test_open_store_by_url():
    memory = open_store("memory://", 5, 7)
    assert isinstance(memory, InProcessStore) and memory.backend == "memory"
    assert (memory.ttl_seconds, memory.max_entries) == (5, 7)
    with pytest.raises(ValueError, match="unsupported memory URL"):
        open_store("mongodb://localhost", 5, 7)
