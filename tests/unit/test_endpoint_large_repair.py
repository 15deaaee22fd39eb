"""A large history is repaired off the event loop: other clients are answered meanwhile (issue 10 item 6);
its parse runs with the cycle collector paused, its check and repair with the heap frozen for the collector.

The event loop is shown free by an ordering, not a clock: the repair of a large body waits, inside the
engine, until ``/healthz`` has been answered. On the loop that could never happen.
"""

import asyncio
import gc
import threading

import httpx
import orjson
import pytest
import respx

from proxy import endpoint
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import AUTH, UPSTREAM, completion, orphan_history, running_proxy

PATH = "/v1/chat/completions"


@pytest.fixture(autouse=True)
def thawed_heap() -> None:
    """The heap as a server's is, with nothing frozen: tests/conftest.py freezes what collection imported, and these
    tests look at the freeze a repair makes and undoes."""
    gc.unfreeze()


def large_broken_body() -> bytes:
    """An orphan result (so it needs repair) and enough history to be past the off-loop threshold."""
    padding = [{"role": "user", "content": "x" * 1000} for _ in range(endpoint.LARGE_BODY_BYTES // 1000 + 1)]
    return orjson.dumps({"model": "m", "messages": [*padding, *orphan_history("call_big")]})


async def test_other_clients_are_answered_while_a_large_body_is_repaired(monkeypatch: pytest.MonkeyPatch) -> None:
    repair_started, healthz_answered = threading.Event(), threading.Event()
    saw_healthz: list[bool] = []

    real_repair = endpoint._repaired

    collector: list[tuple[bool, int]] = []

    def repair_waiting_for_healthz(*args, **kwargs):
        collector.append((gc.isenabled(), gc.get_freeze_count()))
        repair_started.set()
        saw_healthz.append(healthz_answered.wait(HANG_GUARD))
        return real_repair(*args, **kwargs)

    monkeypatch.setattr(endpoint, "_repaired", repair_waiting_for_healthz)
    with respx.mock(base_url=UPSTREAM) as upstream:
        route = upstream.post("/chat/completions").mock(return_value=httpx.Response(200, json=completion(content="ok")))
        async with running_proxy() as proxy:
            large = asyncio.create_task(proxy.client.post(PATH, content=large_broken_body(), headers=AUTH))
            assert await asyncio.to_thread(repair_started.wait, HANG_GUARD)
            health = await proxy.client.get("/healthz")
            healthz_answered.set()
            response = await large
    assert health.status_code == 200
    assert saw_healthz == [True]  # the repair was still running when /healthz was answered
    [(collecting, frozen)] = collector
    assert collecting and frozen > 0  # the collector runs beside the repair, the heap as it began left out
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert response.status_code == 200 and "TM101=1" in response.headers["x-toolmend-repairs"]
    sent = orjson.loads(route.calls.last.request.content)["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == "call_big"  # the repair itself happened, in the thread


def test_a_large_body_is_parsed_without_cycle_collections() -> None:
    # Collections during the parse re-walk the growing tree while the loop waits: 1.5 s instead of 0.4 s
    # for 25 MB (bench/loop_stall.py). Small bodies keep the plain parse.
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 20} for _ in range(20_000)]})
    assert len(body) > endpoint.LARGE_BODY_BYTES
    gc.callbacks.append(count)
    try:
        parsed = endpoint._parse(body)
    finally:
        gc.callbacks.remove(count)
    assert collections == [] and gc.isenabled()
    assert parsed == orjson.loads(body)


def test_the_heap_is_thawed_when_the_work_ends_even_with_another_in_flight() -> None:
    # Two large bodies at once: the first to end puts back every frozen object, the other's too, so nothing stays
    # out of the collector's reach longer than one repair; the collector collects throughout.
    class Cycle:
        pass

    def inner() -> int:
        garbage = Cycle()
        garbage.me = garbage  # a cycle made during the work is collected during it
        del garbage
        return gc.collect()

    def outer() -> int:
        assert endpoint.heap_frozen(inner) > 0
        return gc.get_freeze_count()

    assert endpoint.heap_frozen(outer) == 0  # the inner work's end thawed the outer's heap too
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert endpoint.heap_frozen(gc.get_freeze_count) > 0


def test_the_young_generation_is_collected_less_often_while_large_work_runs_in_any_thread() -> None:
    # Two large bodies in two threads, overlapping: the threshold is raised while either runs, and the one found is put
    # back only when the last ends.
    found = gc.get_threshold()
    first_running, second_done, first_may_end = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, tuple[int, ...]] = {}

    def first() -> None:
        first_running.set()
        assert first_may_end.wait(HANG_GUARD)
        seen["first, at its end"] = gc.get_threshold()

    def second() -> None:
        seen["second"] = gc.get_threshold()

    worker = threading.Thread(target=endpoint.heap_frozen, args=(first,))
    worker.start()
    assert first_running.wait(HANG_GUARD)
    endpoint.heap_frozen(second)
    seen["between"] = gc.get_threshold()  # the second ended; the first still runs
    second_done.set()
    first_may_end.set()
    worker.join(HANG_GUARD)
    raised = (endpoint.YOUNG_OBJECTS, *found[1:])
    assert seen == {"second": raised, "between": raised, "first, at its end": raised}
    assert gc.get_threshold() == found
