"""Fault tests on real sockets: bad upstreams and bad clients, each bounded in time.

The proxy runs under uvicorn in the test's own event loop, so after every fault the test can count the
loop's tasks and the upstream connections still open: nothing may be left behind, and the next request
must work.
"""

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest
import uvicorn

from proxy.app import create_app
from proxy.config import Settings
from tests.support.raw_server import RawRequest, RawServer, ServerConn

CHAT = "/v1/chat/completions"
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
ANSWER = orjson.dumps({"id": "c1", "object": "chat.completion", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]})


def http(status: bytes, body: bytes, content_type: bytes = b"application/json", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %b\r\nContent-Type: %b\r\nContent-Length: %d\r\n%b\r\n%b" % (status, content_type, len(body), extra, body)


def sse_head() -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def event(payload: dict) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


@contextlib.asynccontextmanager
async def proxy_in_this_loop(upstream: str, timeout: float = 2.0) -> AsyncIterator[str]:
    app = create_app(Settings(upstream=upstream + "/v1", upstream_timeout=timeout, port=0))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 5)
        sock.close()


async def settled(baseline: int, seconds: float = 2.0) -> int:
    """The number of tasks once the loop has had up to ``seconds`` to wind down to ``baseline``."""
    deadline = asyncio.get_running_loop().time() + seconds
    while len(asyncio.all_tasks()) > baseline and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    return len(asyncio.all_tasks())


class Upstream:
    """A raw upstream whose behaviour each test sets; answers normally otherwise."""

    def __init__(self) -> None:
        self.behaviour = None

    async def __call__(self, conn: ServerConn) -> None:
        while (request := await conn.read_request()) is not None:
            if self.behaviour is None:
                await conn.send(http(b"200 OK", ANSWER))
            elif await self.behaviour(conn, request) == "close":
                return


@pytest.fixture
async def rig() -> AsyncIterator[tuple[Upstream, RawServer, str, httpx.AsyncClient]]:
    upstream = Upstream()
    async with RawServer(upstream) as server, proxy_in_this_loop(server.url("").rstrip("/")) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            yield upstream, server, url, client


async def works(client: httpx.AsyncClient, upstream: Upstream) -> None:
    upstream.behaviour = None
    answer = await client.post(CHAT, content=BODY, headers={"content-type": "application/json"})
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "hello"


async def no_leaks(client: httpx.AsyncClient, upstream: Upstream, server: RawServer, baseline: int) -> None:
    """The next request works, the tasks wind down, and only pooled connections stay open upstream."""
    await works(client, upstream)
    assert await settled(baseline) <= baseline
    open_upstream = [conn for conn in server.conns if not conn.ended.is_set()]
    assert len(open_upstream) <= 1  # at most the healthy keep-alive connection the last request used


async def baseline_tasks(client: httpx.AsyncClient, upstream: Upstream) -> int:
    await works(client, upstream)
    return await settled(10_000, 0.2)


async def test_upstream_refusing_connections_is_a_502_and_the_proxy_survives() -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    async with proxy_in_this_loop(f"http://127.0.0.1:{port}") as url, httpx.AsyncClient(base_url=url) as client:
        for _ in range(3):
            answer = await client.post(CHAT, content=BODY)
            assert answer.status_code == 502 and answer.json()["error"]["code"] == "upstream_unreachable"


async def test_upstream_that_never_answers_is_a_504_after_the_timeout(rig) -> None:
    upstream, server, _, client = rig
    baseline = await baseline_tasks(client, upstream)

    async def silent(conn: ServerConn, request: RawRequest) -> str:
        await conn.wait_eof()
        return "close"

    upstream.behaviour = silent
    started = asyncio.get_running_loop().time()
    answer = await client.post(CHAT, content=BODY)
    assert answer.status_code == 504 and answer.json()["error"]["code"] == "upstream_timeout"
    assert 1.5 < asyncio.get_running_loop().time() - started < 5
    await no_leaks(client, upstream, server, baseline)


async def test_slow_upstream_within_the_timeout_is_fine(rig) -> None:
    upstream, server, _, client = rig

    async def slow(conn: ServerConn, request: RawRequest) -> None:
        await asyncio.sleep(0.5)
        await conn.send(http(b"200 OK", ANSWER))

    upstream.behaviour = slow
    answer = await client.post(CHAT, content=BODY)
    assert answer.status_code == 200 and answer.content == ANSWER


@pytest.mark.parametrize("path", [CHAT, "/v1/files/file-1/content"])
async def test_upstream_resetting_mid_body(rig, path: str) -> None:
    upstream, server, _, client = rig
    baseline = await baseline_tasks(client, upstream)

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
    upstream, server, _, client = rig
    baseline = await baseline_tasks(client, upstream)

    async def cut(conn: ServerConn, request: RawRequest) -> str:
        await conn.send(sse_head() + chunk(event({"choices": [{"index": 0, "delta": {"content": "par"}}]})))
        await asyncio.sleep(0.05)
        conn.writer.transport.abort()
        return "close"

    upstream.behaviour = cut
    received = b""
    with pytest.raises(httpx.RemoteProtocolError):
        async with client.stream("POST", CHAT, content=BODY) as answer:
            assert answer.status_code == 200
            async for piece in answer.aiter_raw():
                received += piece
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
    upstream, server, url, client = rig
    baseline = await baseline_tasks(client, upstream)
    requests_before = sum(len(conn.requests) for conn in server.conns)
    port = int(url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%b" % (len(BODY), BODY[:10]))
    await writer.drain()
    writer.transport.abort()
    await asyncio.sleep(0.2)
    assert sum(len(conn.requests) for conn in server.conns) == requests_before
    await no_leaks(client, upstream, server, baseline)


async def test_client_leaving_mid_stream_closes_the_upstream_at_once(rig) -> None:
    upstream, server, _, client = rig
    baseline = await baseline_tasks(client, upstream)
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
    await asyncio.wait_for(upstream_saw_close.wait(), 2)
    await no_leaks(client, upstream, server, baseline)


async def test_client_leaving_while_the_upstream_thinks_cancels_the_upstream_request(rig) -> None:
    upstream, server, _, client = rig
    baseline = await baseline_tasks(client, upstream)
    upstream_saw_close = asyncio.Event()

    async def thinking(conn: ServerConn, request: RawRequest) -> str:
        await conn.wait_eof()
        upstream_saw_close.set()
        return "close"

    upstream.behaviour = thinking
    with pytest.raises(httpx.ReadTimeout):
        await client.post(CHAT, content=BODY, timeout=0.3)
    await asyncio.wait_for(upstream_saw_close.wait(), 2)
    await no_leaks(client, upstream, server, baseline)
