"""Fault tests on real sockets: bad upstreams and bad clients, each bounded in time.

The proxy runs under uvicorn in the test's own event loop, so after every fault the test can count the
loop's tasks and the upstream connections still open: nothing may be left behind, and the next request
must work. Every wait is for an event or a condition, bounded by ``HANG_GUARD``; no test depends on how
fast anything happens.
"""

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import orjson
import pytest
import uvicorn

from proxy.app import create_app
from proxy.config import Settings
from tests.support.client_tls import TLS
from tests.support.processes import HANG_GUARD, eventually
from tests.support.raw_server import RawRequest, RawServer, ServerConn

CHAT = "/v1/chat/completions"
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
ANSWER = orjson.dumps({"id": "c1", "object": "chat.completion", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]})
RAW_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(BODY)
#: The proxy's upstream timeout in every test but the one about it: longer than any wait here, so no test
#: can pass because the timeout stepped in instead of the behaviour it names.
LONGER_THAN_ANY_TEST = 10 * HANG_GUARD
#: The upstream timeout of the test that waits it out: short, yet far above what an answer from the
#: upstream in this loop takes even on a loaded machine.
SHORT_TIMEOUT = 1.0


def http(status: bytes, body: bytes, content_type: bytes = b"application/json", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %b\r\nContent-Type: %b\r\nContent-Length: %d\r\n%b\r\n%b" % (status, content_type, len(body), extra, body)


def sse_head() -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def event(payload: dict) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


@dataclass
class InLoopProxy:
    url: str
    server: uvicorn.Server

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def busy(self) -> bool:
        """A request is being handled. Once not, whatever the proxy sends upstream for it has been sent."""
        return bool(self.server.server_state.tasks)

    def idle(self) -> bool:
        return not self.busy()


@contextlib.asynccontextmanager
async def proxy_in_this_loop(upstream: str, timeout: float = LONGER_THAN_ANY_TEST) -> AsyncIterator[InLoopProxy]:
    app = create_app(Settings(upstream=upstream + "/v1", upstream_timeout=timeout, port=0))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    await eventually(lambda: server.started or serving.done(), "uvicorn starting")
    if serving.done():
        serving.result()  # it failed to start: raise why
    try:
        yield InLoopProxy(f"http://127.0.0.1:{sock.getsockname()[1]}", server)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, HANG_GUARD)
        sock.close()


class Upstream:
    """A raw upstream whose behaviour each test sets; answers normally otherwise."""

    def __init__(self) -> None:
        self.behaviour = None
        self.cut_short = 0  # requests that began to arrive but never did in full

    async def __call__(self, conn: ServerConn) -> None:
        try:
            while (request := await conn.read_request()) is not None:
                if self.behaviour is None:
                    await conn.send(http(b"200 OK", ANSWER))
                elif await self.behaviour(conn, request) == "close":
                    return
        except asyncio.IncompleteReadError:
            self.cut_short += 1
            raise


@contextlib.asynccontextmanager
async def rigged(timeout: float = LONGER_THAN_ANY_TEST) -> AsyncIterator[tuple[Upstream, RawServer, InLoopProxy, httpx.AsyncClient]]:
    """The upstream, the proxy in front of it, and a client whose timeout is the hang guard."""
    upstream = Upstream()
    async with RawServer(upstream) as server, proxy_in_this_loop(server.url("").rstrip("/"), timeout) as proxy:
        async with httpx.AsyncClient(base_url=proxy.url, timeout=HANG_GUARD, verify=TLS) as client:
            yield upstream, server, proxy, client


@pytest.fixture
async def rig() -> AsyncIterator[tuple[Upstream, RawServer, InLoopProxy, httpx.AsyncClient]]:
    async with rigged() as parts:
        yield parts


async def works(client: httpx.AsyncClient, upstream: Upstream) -> None:
    upstream.behaviour = None
    answer = await client.post(CHAT, content=BODY, headers={"content-type": "application/json"})
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "hello"


async def no_leaks(client: httpx.AsyncClient, upstream: Upstream, server: RawServer, baseline: int) -> None:
    """The next request works, the tasks wind down, and only pooled connections stay open upstream."""
    await works(client, upstream)
    with contextlib.suppress(TimeoutError):
        await eventually(lambda: len(asyncio.all_tasks()) <= baseline, "the tasks winding down")
    left = asyncio.all_tasks()
    assert len(left) <= baseline, sorted(task.get_coro().__qualname__ for task in left)
    open_upstream = [conn for conn in server.conns if not conn.ended.is_set()]
    assert len(open_upstream) <= 1  # at most the healthy keep-alive connection the last request used


async def baseline_tasks(client: httpx.AsyncClient, upstream: Upstream, proxy: InLoopProxy) -> int:
    """The loop's tasks after a healthy request, once the proxy has finished handling it."""
    await works(client, upstream)
    await eventually(proxy.idle, "the proxy finishing a healthy request")
    return len(asyncio.all_tasks())


async def raw_client(proxy: InLoopProxy, sent: bytes) -> asyncio.StreamWriter:
    """A client connection to the proxy that has sent ``sent`` (a request, whole or in part), to leave mid-way."""
    _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(sent)
    await writer.drain()
    return writer


async def test_upstream_refusing_connections_is_a_502_and_the_proxy_survives() -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    async with proxy_in_this_loop(f"http://127.0.0.1:{port}") as proxy, httpx.AsyncClient(base_url=proxy.url, timeout=HANG_GUARD, verify=TLS) as client:
        for _ in range(3):
            answer = await client.post(CHAT, content=BODY)
            assert answer.status_code == 502 and answer.json()["error"]["code"] == "upstream_unreachable"


async def test_upstream_that_never_answers_is_a_504_after_the_timeout() -> None:
    async with rigged(timeout=SHORT_TIMEOUT) as (upstream, server, proxy, client):
        baseline = await baseline_tasks(client, upstream, proxy)
        requests_before = len(server.requests)

        async def silent(conn: ServerConn, request: RawRequest) -> str:
            await conn.wait_eof()
            return "close"

        upstream.behaviour = silent
        answer = await client.post(CHAT, content=BODY)  # the client's timeout is the hang guard
        assert answer.status_code == 504 and answer.json()["error"]["code"] == "upstream_timeout"
        assert len(server.requests) == requests_before + 1  # it timed out waiting for the answer, not for the upstream
        await no_leaks(client, upstream, server, baseline)  # and hung up on the upstream: its connection ended


async def test_slow_upstream_within_the_timeout_is_fine(rig) -> None:
    upstream, server, _, client = rig

    async def slow(conn: ServerConn, request: RawRequest) -> None:
        await asyncio.sleep(0.5)  # an upstream that thinks for a while: no shorter limit may cut it off
        await conn.send(http(b"200 OK", ANSWER))

    upstream.behaviour = slow
    answer = await client.post(CHAT, content=BODY)
    assert answer.status_code == 200 and answer.content == ANSWER


@pytest.mark.parametrize("path", [CHAT, "/v1/files/file-1/content"])
async def test_upstream_resetting_mid_body(rig, path: str) -> None:
    upstream, server, proxy, client = rig
    baseline = await baseline_tasks(client, upstream, proxy)

    async def half(conn: ServerConn, request: RawRequest) -> str:
        await conn.send(http(b"200 OK", ANSWER)[:-10])  # promise the full length, send less
        conn.writer.transport.abort()  # a reset, not a clean close
        return "close"

    upstream.behaviour = half
    if path == CHAT:  # a chat answer is read whole to remember its calls: the break becomes a 502
        answer = await client.post(path, content=BODY)
        assert answer.status_code == 502 and answer.json()["error"]["code"] == "upstream_unreachable"
    else:  # streamed through: the status went out already, so the body just ends short
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get(path)
    await no_leaks(client, upstream, server, baseline)


async def test_upstream_resetting_mid_stream_ends_the_stream(rig) -> None:
    upstream, server, proxy, client = rig
    baseline = await baseline_tasks(client, upstream, proxy)
    relayed = asyncio.Event()

    async def cut(conn: ServerConn, request: RawRequest) -> str:
        await conn.send(sse_head() + chunk(event({"choices": [{"index": 0, "delta": {"content": "par"}}]})))
        await asyncio.wait_for(relayed.wait(), HANG_GUARD)  # reset mid-stream: after the client has the first event
        conn.writer.transport.abort()
        return "close"

    upstream.behaviour = cut
    received = b""
    with pytest.raises(httpx.RemoteProtocolError):
        async with client.stream("POST", CHAT, content=BODY) as answer:
            assert answer.status_code == 200
            async for piece in answer.aiter_raw():
                received += piece
                if b'"par"' in received:
                    relayed.set()
    assert b'"par"' in received
    await no_leaks(client, upstream, server, baseline)


async def test_invalid_json_answer_passes_through_unchanged(rig) -> None:
    upstream, server, _, client = rig

    async def garbage(conn: ServerConn, request: RawRequest) -> None:
        await conn.send(http(b"200 OK", b'{"choices": [nope'))

    upstream.behaviour = garbage
    answer = await client.post(CHAT, content=BODY)
    assert answer.status_code == 200 and answer.content == b'{"choices": [nope'
    await works(client, upstream)


async def test_stream_without_done_ends_cleanly(rig) -> None:
    upstream, server, _, client = rig
    call = {"index": 0, "id": "call_nodone", "type": "function", "function": {"name": "f", "arguments": "{}"}}

    async def no_done(conn: ServerConn, request: RawRequest) -> None:
        await conn.send(sse_head() + chunk(event({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})) + b"0\r\n\r\n")

    upstream.behaviour = no_done
    answer = await client.post(CHAT, content=BODY)
    assert answer.status_code == 200 and b"call_nodone" in answer.content and b"[DONE]" not in answer.content
    await works(client, upstream)


@pytest.mark.parametrize("status", [b"429 Too Many Requests", b"500 Internal Server Error", b"503 Service Unavailable"])
async def test_upstream_errors_pass_through_with_their_headers(rig, status: bytes) -> None:
    upstream, server, _, client = rig
    error = orjson.dumps({"error": {"message": "slow down", "type": "rate_limit", "param": None, "code": None}})

    async def failing(conn: ServerConn, request: RawRequest) -> None:
        await conn.send(http(status, error, extra=b"Retry-After: 7\r\nX-Ratelimit-Remaining-Requests: 0\r\n"))

    upstream.behaviour = failing
    answer = await client.post(CHAT, content=BODY)
    assert answer.status_code == int(status[:3])
    assert answer.headers["retry-after"] == "7" and answer.headers["x-ratelimit-remaining-requests"] == "0"
    assert answer.content == error
    await works(client, upstream)


async def test_client_leaving_mid_request_sends_nothing_upstream(rig) -> None:
    upstream, server, proxy, client = rig
    baseline = await baseline_tasks(client, upstream, proxy)
    requests_before = len(server.requests)
    writer = await raw_client(proxy, RAW_HEAD + BODY[:10])
    await eventually(proxy.busy, "the proxy reading the request body")
    writer.transport.abort()
    await eventually(proxy.idle, "the proxy giving up on the departed client")
    # Anything the proxy sent upstream for it is sent by now; the next request marks where it would show.
    await no_leaks(client, upstream, server, baseline)
    assert len(server.requests) == requests_before + 1 and server.requests[-1].body == BODY  # only the marker
    assert upstream.cut_short == 0  # not even a part of the departed one


async def test_client_leaving_mid_stream_closes_the_upstream_at_once(rig) -> None:
    upstream, server, proxy, client = rig
    baseline = await baseline_tasks(client, upstream, proxy)
    upstream_saw_close = asyncio.Event()

    async def endless(conn: ServerConn, request: RawRequest) -> str:
        await conn.send(sse_head())
        try:
            while True:  # one event every 50 ms until the proxy hangs up
                await conn.send(chunk(event({"choices": [{"index": 0, "delta": {"content": "x"}}]})))
                await asyncio.sleep(0.05)
        except ConnectionError:
            upstream_saw_close.set()
        return "close"

    upstream.behaviour = endless
    async with client.stream("POST", CHAT, content=BODY) as answer:
        async for _ in answer.aiter_raw():
            break  # read one chunk, then leave
    await asyncio.wait_for(upstream_saw_close.wait(), HANG_GUARD)  # the stream is endless: only leaving ends it
    await no_leaks(client, upstream, server, baseline)


async def test_client_leaving_while_the_upstream_thinks_cancels_the_upstream_request(rig) -> None:
    upstream, server, proxy, client = rig
    baseline = await baseline_tasks(client, upstream, proxy)
    upstream_has_it, upstream_saw_close = asyncio.Event(), asyncio.Event()

    async def thinking(conn: ServerConn, request: RawRequest) -> str:
        upstream_has_it.set()
        await conn.wait_eof()
        upstream_saw_close.set()
        return "close"

    upstream.behaviour = thinking
    writer = await raw_client(proxy, RAW_HEAD + BODY)
    await asyncio.wait_for(upstream_has_it.wait(), HANG_GUARD)
    writer.close()  # leave while the upstream thinks
    # The proxy's upstream timeout is longer than this wait: only the departure can end the upstream request.
    await asyncio.wait_for(upstream_saw_close.wait(), HANG_GUARD)
    await no_leaks(client, upstream, server, baseline)
