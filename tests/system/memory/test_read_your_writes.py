"""Read your writes: a turn is in the shared store before the last byte of the answer that carried it reaches
the client. A fast agent (instant tools) sends its tool results the moment the answer ends, and another
worker or replica may get them; that one must recall the real call, not synthesize one.

Two app instances stand for two workers: each has its own store object (its own pending buffer, its own
writer) on one SQLite file or one real redis-server, and the first one's writes are slowed on purpose.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from proxy.memory.groupcommit import GroupCommitStore
from proxy.memory.redis import RedisStore
from proxy.memory.sqlite import SqliteStore
from tests.support.processes import HANG_GUARD, RedisServer
from tests.support.proxy_fixtures import (
    AUTH,
    DONE,
    AsgiCall,
    ScriptedStream,
    build_app,
    call,
    call_asgi,
    chunk,
    completion,
    delta,
    event,
    orphan_history,
    sse_response,
    started,
    tenant_for,
)

PATH = "/v1/chat/completions"
HEADERS = [(b"authorization", AUTH["authorization"].encode()), (b"content-type", b"application/json")]
#: How long the slowed store takes for each write: far longer than a client needs to send its next request.
WRITE_DELAY = 0.2
CALL = call("call_ryw", "weather", '{"city": "Paris", "unit": "C"}')


class SlowWrites:
    """Mixed into a store: every write first waits ``WRITE_DELAY`` seconds, or until ``gate`` opens when one
    is set, and says when it started (``writing``)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.writing = asyncio.Event()
        self.gate: asyncio.Event | None = None

    async def write(self, batch) -> None:
        self.writing.set()
        if self.gate is not None:
            await self.gate.wait()
        else:
            await asyncio.sleep(WRITE_DELAY)
        await super().write(batch)


class SlowSqlite(SlowWrites, SqliteStore):
    pass


class SlowRedis(SlowWrites, RedisStore):
    pass


@pytest.fixture(scope="module")
def redis_server():
    with RedisServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "redis"])
def stores(request, tmp_path: Path) -> Callable[[bool], GroupCommitStore]:
    """Opens a store on the test's shared location: slowed (the worker that answers first) or not."""
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.command(b"FLUSHALL")
        return lambda slow: (SlowRedis if slow else RedisStore)(server.url(), 60, 1000)
    path = str(tmp_path / "memory.db")
    return lambda slow: (SlowSqlite if slow else SqliteStore)(path, 60, 1000)


def tool_call_stream() -> ScriptedStream:
    return ScriptedStream([
        event(chunk([delta(role="assistant", tool_calls=[{"index": 0, **CALL, "function": {"name": "weather", "arguments": ""}}])])),
        event(chunk([delta(tool_calls=[{"index": 0, "function": {"arguments": CALL["function"]["arguments"]}}])])),
        event(chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])),
        DONE,
    ])


def answer_with_a_call(streamed: bool) -> httpx.Response:
    if streamed:
        return sse_response(tool_call_stream())
    return httpx.Response(200, json=completion([CALL]))


def is_terminal(message: dict[str, Any], streamed: bool) -> bool:
    """The message that ends the answer for a client: the stream's [DONE], the JSON body."""
    if message["type"] != "http.response.body":
        return False
    return DONE in message.get("body", b"") if streamed else not message.get("more_body", False)


@contextlib.asynccontextmanager
async def two_workers(first: GroupCommitStore, second: GroupCommitStore) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """The first worker's app (called directly, to act the instant a message goes out) and a client of the second."""
    async with (started(build_app(store=first)) as app, started(build_app(store=second)) as other,
                httpx.AsyncClient(transport=httpx.ASGITransport(app=other), base_url="http://proxy.test") as client):
        yield app, client


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
async def test_the_next_request_to_another_worker_recalls_the_exact_call(upstream, stores, streamed: bool) -> None:
    route = upstream.post("/chat/completions").mock(side_effect=[answer_with_a_call(streamed),
                                                                 httpx.Response(200, json=completion(content="18C"))])
    question = orjson.dumps({"model": "m", "stream": streamed, "messages": orphan_history(CALL["id"])[:1]})
    follow_up = {"model": "m", "messages": orphan_history(CALL["id"])}  # the client dropped the call itself
    replies: list[httpx.Response] = []
    async with two_workers(stores(True), stores(False)) as (app, other):
        asgi = AsgiCall()

        async def on_send(message: dict[str, Any]) -> None:
            if is_terminal(message, streamed):  # the instant the answer ends, the tool result goes to the other worker
                replies.append(await other.post(PATH, json=follow_up, headers=AUTH))

        asgi.on_send = on_send
        with anyio.fail_after(HANG_GUARD):
            await call_asgi(app, asgi, "POST", PATH, HEADERS, [question])
    assert asgi.status == 200 and len(replies) == 1
    assert replies[0].headers["x-toolmend-calls"] == "recalled=1,synthesized=0"
    sent = route.calls.last.request.content
    assert orjson.loads(sent)["messages"][1]["tool_calls"] == [CALL]  # the upstream's own call, as it sent it
    assert b"unknown_tool" not in sent


async def test_the_terminal_event_waits_for_the_store_while_every_chunk_before_it_is_out(upstream, tmp_path: Path) -> None:
    path = str(tmp_path / "memory.db")
    store, peer = SlowSqlite(path, 60, 1000), SqliteStore(path, 60, 1000)  # peer: another worker on the file
    store.gate = asyncio.Event()
    reached_client = anyio.Event()
    stream = tool_call_stream()
    stream.items.insert(1, reached_client)  # the upstream goes on only once its first chunk reached the client
    upstream.post("/chat/completions").mock(side_effect=lambda request: sse_response(stream))
    peer_had_it_at_done: list[bool] = []
    asgi = AsgiCall()

    async def on_send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            reached_client.set()
            if DONE in message["body"]:
                peer_had_it_at_done.append(CALL["id"] in await peer.recall(tenant_for(), [CALL["id"]]))

    asgi.on_send = on_send
    body = orjson.dumps({"model": "m", "stream": True, "messages": orphan_history(CALL["id"])[:1]})
    async with started(build_app(store=store)) as app, anyio.create_task_group() as requests:
        requests.start_soon(call_asgi, app, asgi, "POST", PATH, HEADERS, [body])
        with anyio.fail_after(HANG_GUARD):
            await store.writing.wait()
        assert stream.yielded == len(stream.items) - 1  # the upstream sent everything, [DONE] included
        assert asgi.body_chunks == [item for item in stream.items if isinstance(item, bytes)][:-1]  # all but [DONE]
        assert await peer.recall(tenant_for(), [CALL["id"]]) == {}  # not written yet
        store.gate.set()
    assert asgi.body_chunks[-1] == DONE and asgi.finished
    assert peer_had_it_at_done == [True]
    await peer.close()


async def test_a_store_that_does_not_answer_delays_the_end_by_the_bound_and_writes_the_turn_later(upstream, tmp_path: Path,
                                                                                               caplog) -> None:
    bound = 0.3
    path = str(tmp_path / "memory.db")
    store, peer = SlowSqlite(path, 60, 1000), SqliteStore(path, 60, 1000)
    store.gate = asyncio.Event()  # opened only once the answer is over
    upstream.post("/chat/completions").mock(side_effect=lambda request: sse_response(tool_call_stream()))
    loop = asyncio.get_running_loop()
    sent_at: list[float] = []  # when each chunk went out
    asgi = AsgiCall()

    async def on_send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            sent_at.append(loop.time())

    asgi.on_send = on_send
    body = orjson.dumps({"model": "m", "stream": True, "messages": orphan_history(CALL["id"])[:1]})
    async with started(build_app(store=store)) as app:
        guarded = app.state.proxy.store
        guarded.remember_timeout = bound
        with anyio.fail_after(HANG_GUARD), caplog.at_level(logging.WARNING, logger="toolmend"):
            await call_asgi(app, asgi, "POST", PATH, HEADERS, [body])
        assert asgi.body_chunks[-1] == DONE and asgi.finished
        assert sent_at[-1] - sent_at[-2] >= bound  # [DONE] was held that long (from before it was read) ...
        assert "operation=remember error=TimeoutError" in caplog.text  # ... and let go by the bound: the store
        assert not guarded.available and guarded.failures == 1  # counts as down
        store.gate.set()  # the store answers at last: its own write goes on and lands
        with anyio.fail_after(HANG_GUARD):
            assert await store.flush(HANG_GUARD)
        assert CALL["id"] in await peer.recall(tenant_for(), [CALL["id"]])
    await peer.close()
