"""FastTransport against real sockets: small raw asyncio servers on 127.0.0.1 that write exact bytes, so the
tests control framing, ordering and misbehaviour (and count TCP accepts to see connection reuse).

No test measures time: where order matters, the server waits on an event the test sets (or on a condition of
the client it can see, as both run in one loop), so "streamed as it arrives" means the next chunk is not even
written before the client has the previous one. Timeouts are hang guards; how fast the transport relays is
bench/'s business (bench/stream_delay.py: per-chunk delay).
"""

import asyncio
import contextlib
import gzip
import socket
import ssl
import subprocess
import zlib
from collections.abc import AsyncIterator

import httpx
import pytest

from proxy.app import create_app
from proxy.config import Settings
from proxy.transfer_coding import DECODED_PIECE, YIELD_EVERY, Decoded
from proxy.transport import MAX_HEAD_BYTES, READ_HIGH_WATER, CertificateError, FastTransport
from tests.support.raw_server import RawRequest, RawServer, ServerConn, ok, respond

GUARD = 30.0  # bounds a whole test: a passing one takes milliseconds, a broken one must not hang the suite
T = GUARD / 2  # the transport's timeouts, inside the guard so that a hang fails with the transport's own error


def timeouts(read: float = T, connect: float = T, write: float = T) -> dict:
    return {"timeout": {"connect": connect, "read": read, "write": write, "pool": T}}


def request(method: str, url: str, read: float = T, write: float = T, **kwargs) -> httpx.Request:
    return httpx.Request(method, url, extensions=timeouts(read=read, write=write), **kwargs)


async def fetch(transport: FastTransport, method: str, url: str, **kwargs) -> tuple[httpx.Response, bytes]:
    response = await transport.handle_async_request(request(method, url, **kwargs))
    body = await response.aread()
    return response, body


def idle(transport: FastTransport, server: RawServer) -> list:
    return transport._idle.get(("http", "127.0.0.1", server.port), [])


async def eventually(predicate, timeout: float = GUARD) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


@pytest.fixture
async def transport() -> AsyncIterator[FastTransport]:
    t = FastTransport()
    yield t
    await t.aclose()


# --- response framing ---------------------------------------------------------------------------------


async def test_content_length_response(transport: FastTransport) -> None:
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok(b"hello world"))) as server:
        response, body = await fetch(transport, "GET", server.url("/x"))
        assert (response.status_code, body) == (200, b"hello world")
        assert response.headers["content-length"] == "11"
        assert response.extensions["http_version"] == b"HTTP/1.1"
        assert len(idle(transport, server)) == 1


async def test_chunked_response_with_extensions(transport: FastTransport) -> None:
    wire = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\n"
        b"1\r\n \r\n"
        b"a;x;y=\"q\"\r\n0123456789\r\n"
        b"0;last\r\nX-Trailer: t\r\n\r\n"
    )
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: wire)) as server:
        for _ in range(2):  # framing fully consumed: the same connection serves the next exchange
            response, body = await fetch(transport, "GET", server.url())
            assert (response.status_code, body) == (200, b"hello 0123456789")
        assert server.accepts == 1


async def test_body_delimited_by_connection_close(transport: FastTransport) -> None:
    got_first = [asyncio.Event(), asyncio.Event()]

    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nfirst ")
        await got_first[conn.index].wait()
        await conn.send(b"second")
        conn.close()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        for n in (1, 2):
            response = await transport.handle_async_request(request("GET", server.url()))
            stream = response.aiter_raw()
            assert (response.status_code, await anext(stream)) == (200, b"first ")
            got_first[n - 1].set()
            assert [chunk async for chunk in stream] == [b"second"]
            assert server.accepts == n  # a connection whose body ended with it is never pooled
        assert idle(transport, server) == []


async def test_204_and_304_have_no_body_and_keep_the_connection(transport: FastTransport) -> None:
    def answer(r: RawRequest) -> bytes:
        if r.target == b"/204":
            return b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n"
        if r.target == b"/304":  # a 304 may carry the representation's Content-Length; still no body
            return b"HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\nContent-Length: 10\r\n\r\n"
        return ok(b"after")

    async with asyncio.timeout(GUARD), RawServer(respond(answer)) as server:
        response, body = await fetch(transport, "GET", server.url("/204"))
        assert (response.status_code, body) == (204, b"")
        response, body = await fetch(transport, "GET", server.url("/304"))
        assert (response.status_code, body) == (304, b"")
        response, body = await fetch(transport, "GET", server.url("/ok"))
        assert (response.status_code, body) == (200, b"after")
        assert server.accepts == 1


async def test_head_response_has_no_body_and_the_pool_still_works(transport: FastTransport) -> None:
    def answer(r: RawRequest) -> bytes:
        if r.method == "HEAD":
            return b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
        return ok(b"got")

    async with asyncio.timeout(GUARD), RawServer(respond(answer)) as server:
        # Waiting for the 100 announced bytes, which never come, would end in a ReadTimeout.
        response, body = await fetch(transport, "HEAD", server.url())
        assert (response.status_code, body, response.headers["content-length"]) == (200, b"", "100")
        response, body = await fetch(transport, "GET", server.url())
        assert (response.status_code, body) == (200, b"got")
        response, body = await fetch(transport, "GET", server.url())
        assert body == b"got"
        # What the code does: a connection that answered HEAD is closed, never pooled (httptools cannot be
        # told to skip the announced body); the two GETs share the second connection.
        assert server.accepts == 2
        await eventually(lambda: server.conns[0].ended.is_set())
        assert server.conns[0].saw_eof


# --- keep-alive ---------------------------------------------------------------------------------------


async def test_twenty_sequential_requests_share_one_connection(transport: FastTransport) -> None:
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok(r.target))) as server:
        for i in range(20):
            response, body = await fetch(transport, "GET", server.url(f"/{i}"))
            assert body == f"/{i}".encode()
        assert server.accepts == 1
        assert [r.conn_index for r in server.requests] == [0] * 20
        assert len(idle(transport, server)) == 1


async def test_connection_close_from_server_is_not_reused(transport: FastTransport) -> None:
    # The server says "Connection: close" but leaves the socket open: the transport must not reuse it anyway.
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok(extra=b"Connection: close\r\n"))) as server:
        for n in (1, 2, 3):
            response, body = await fetch(transport, "GET", server.url())
            assert body == b"ok"
            assert server.accepts == n
        assert idle(transport, server) == []
        await eventually(lambda: all(c.ended.is_set() for c in server.conns))  # the client closed them all


async def test_idle_connection_closed_by_server_reconnects(transport: FastTransport) -> None:
    async def handler(conn: ServerConn) -> None:  # keep-alive timeout of zero: answer one, then hang up
        await conn.read_request()
        await conn.send(ok())
        conn.close()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        await fetch(transport, "GET", server.url())
        pooled = idle(transport, server)[0]
        await eventually(lambda: pooled.closed)  # the close was noticed while idle
        response, body = await fetch(transport, "GET", server.url())
        assert body == b"ok"
        assert server.accepts == 2


def close_on_second_request(always: bool = False):
    """Connection 0 answers its first request, then reads the next one and hangs up without answering (the
    keep-alive race: the server closed just as the request went out). Later connections answer, unless
    ``always``, in which case they hang up on their first request too."""

    async def handler(conn: ServerConn) -> None:
        if conn.index == 0:
            await conn.read_request()
            await conn.send(ok())
        elif not always:
            while (r := await conn.read_request()) is not None:
                await conn.send(ok(b"retried:" + r.body))
            return
        await conn.read_request()
        conn.close()

    return handler


async def test_stale_connection_retry_with_replayable_body(transport: FastTransport) -> None:
    async with asyncio.timeout(GUARD), RawServer(close_on_second_request()) as server:
        await fetch(transport, "GET", server.url())
        response, body = await fetch(transport, "POST", server.url(), content=b"payload")
        assert (response.status_code, body) == (200, b"retried:payload")
        assert server.accepts == 2
        # the request reached the server twice: once on the stale connection, once on the fresh one
        assert [(r.conn_index, r.body) for r in server.requests] == [(0, b""), (0, b"payload"), (1, b"payload")]


async def test_stale_connection_is_not_retried_with_streamed_body(transport: FastTransport) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"stream"

    async with asyncio.timeout(GUARD), RawServer(close_on_second_request()) as server:
        await fetch(transport, "GET", server.url())
        with pytest.raises(httpx.RemoteProtocolError):
            await transport.handle_async_request(request("POST", server.url(), content=body()))
        assert idle(transport, server) == []
        await fetch(transport, "GET", server.url())  # a retry would have come before this on connection 1
        # the body was consumed: no second attempt
        assert [(r.conn_index, r.body) for r in server.requests] == [(0, b""), (0, b"stream"), (1, b"")]


async def test_stale_connection_retry_happens_only_once(transport: FastTransport) -> None:
    async with asyncio.timeout(GUARD), RawServer(close_on_second_request(always=True)) as server:
        await fetch(transport, "GET", server.url())
        with pytest.raises(httpx.RemoteProtocolError):
            await transport.handle_async_request(request("GET", server.url()))
        assert server.accepts == 2  # the stale one, then one fresh attempt, which is not retried


# --- concurrency --------------------------------------------------------------------------------------


def together(batch: int):
    """Answers ``/together`` requests only once ``batch`` of them are waiting at the same time, which proves
    they went out on ``batch`` connections at once; other paths answer straight away."""
    barrier = asyncio.Barrier(batch)

    async def answer(r: RawRequest) -> bytes:
        if r.target == b"/together":
            await barrier.wait()
        return ok(r.target)

    return answer


async def test_32_concurrent_requests(transport: FastTransport) -> None:
    async with asyncio.timeout(GUARD), RawServer(respond(together(32))) as server:
        for round_ in range(2):
            results = await asyncio.gather(*(fetch(transport, "GET", server.url("/together")) for _ in range(32)))
            assert [body for _, body in results] == [b"/together"] * 32
            assert server.accepts == 32  # round 2 reuses every connection round 1 opened
            pool = idle(transport, server)
            assert len(pool) == 32
            assert len(set(map(id, pool))) == 32 and all(c.reusable for c in pool)


async def test_max_idle_bound() -> None:
    transport = FastTransport(max_idle=4)
    try:
        async with asyncio.timeout(GUARD), RawServer(respond(together(16))) as server:
            await asyncio.gather(*(fetch(transport, "GET", server.url("/together")) for _ in range(16)))
            assert server.accepts == 16
            assert len(idle(transport, server)) == 4
            # the 12 surplus connections were closed by the client
            await eventually(lambda: sum(c.ended.is_set() for c in server.conns) == 12)
            for _ in range(8):
                await fetch(transport, "GET", server.url())
            assert server.accepts == 16
            assert len(idle(transport, server)) == 4
    finally:
        await transport.aclose()


# --- request bodies -----------------------------------------------------------------------------------


async def test_bytes_body(transport: FastTransport) -> None:
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok())) as server:
        await fetch(transport, "POST", server.url(), content=b"\x00binary\r\n\r\nbody")
        (r,) = server.requests
        assert (r.method, r.body, r.header(b"content-length"), r.chunk_sizes) == ("POST", b"\x00binary\r\n\r\nbody", b"15", None)


async def test_streamed_body_without_length_goes_chunked(transport: FastTransport) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"abc"
        yield b""  # an empty piece must not end the chunked body early
        yield b"0\r\n\r\n"  # looks like a last chunk: framing must not care
        yield b"defg"

    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok())) as server:
        await fetch(transport, "POST", server.url(), content=body())
        await fetch(transport, "GET", server.url())  # framing ended exactly: the connection is reusable
        r = server.requests[0]
        assert r.header(b"transfer-encoding") == b"chunked"
        assert (r.body, r.chunk_sizes) == (b"abc0\r\n\r\ndefg", [3, 5, 4])
        assert server.accepts == 1


async def test_streamed_body_with_content_length_goes_raw(transport: FastTransport) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"abc"
        yield b"defg"

    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok())) as server:
        await fetch(transport, "POST", server.url(), content=body(), headers={"content-length": "7"})
        await fetch(transport, "GET", server.url())
        r = server.requests[0]
        assert (r.header(b"transfer-encoding"), r.header(b"content-length")) == (None, b"7")
        assert (r.body, r.chunk_sizes) == (b"abcdefg", None)
        assert server.requests[1].method == "GET" and server.accepts == 1


@pytest.mark.parametrize("kind", ["bytes", "chunked", "streamed-with-length"])
async def test_large_body(transport: FastTransport, kind: str) -> None:
    payload = bytes(range(256)) * (8 * 1024 * 1024 // 256)

    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(payload), 65536):
            yield payload[i : i + 65536]

    kwargs: dict = {"content": payload} if kind == "bytes" else {"content": pieces()}
    if kind == "streamed-with-length":
        kwargs["headers"] = {"content-length": str(len(payload))}
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok(b"%d" % len(r.body)))) as server:
        response, body = await fetch(transport, "POST", server.url(), **kwargs)
        assert body == b"8388608"
        assert server.requests[0].body == payload
        assert (server.requests[0].chunk_sizes is not None) == (kind == "chunked")


# --- response streaming -------------------------------------------------------------------------------


async def test_chunks_are_yielded_as_they_arrive(transport: FastTransport) -> None:
    # The server writes chunk i+1 only once the test holds chunk i: a transport that held chunks back (until
    # the end, or until some amount had gathered) would leave both sides waiting, and the guard would fire.
    delivered = [asyncio.Event() for _ in range(5)]

    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i, got in enumerate(delivered):
            await conn.send(b"6\r\nchunk%d\r\n" % i)
            await got.wait()
        await conn.send(b"0\r\n\r\n")
        await conn.wait_eof()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        response = await transport.handle_async_request(request("GET", server.url()))
        chunks = []
        async for chunk in response.aiter_raw():
            chunks.append(chunk)
            delivered[len(chunks) - 1].set()
        assert chunks == [b"chunk%d" % i for i in range(5)]


async def test_back_pressure_bounds_buffering(transport: FastTransport) -> None:
    size, piece = 16 * 1024 * 1024, b"x" * 65536
    progress = {"sent": 0}

    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        while progress["sent"] < size:
            await conn.send(piece)
            progress["sent"] += len(piece)
        await conn.wait_eof()

    bound = READ_HIGH_WATER + 512 * 1024  # the high water mark plus at most one socket read past it
    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        response = await transport.handle_async_request(request("GET", server.url()))
        connection = response.stream.connection
        stream = response.aiter_raw()
        received = len(await anext(stream))
        # The test reads nothing more: the transport must stop reading, and then the server, its socket full,
        # must wait (its own write buffer over the high water mark means it is stuck in drain()).
        writer = server.conns[0].writer.transport
        await eventually(lambda: connection.paused and writer.get_write_buffer_size() > writer.get_write_buffer_limits()[1])
        assert connection.buffered <= bound
        assert progress["sent"] < size  # held back: the response cannot all be in flight
        peak = 0
        async for chunk in stream:
            peak = max(peak, connection.buffered + len(chunk))
            received += len(chunk)
        assert received == size
        assert peak <= bound
        assert connection.buffered == 0 and not connection.paused


# --- errors -------------------------------------------------------------------------------------------


async def test_connection_refused(transport: FastTransport) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with asyncio.timeout(GUARD):
        with pytest.raises(httpx.ConnectError):
            await transport.handle_async_request(request("GET", f"http://127.0.0.1:{port}/"))


async def test_no_answer_is_a_read_timeout(transport: FastTransport) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.wait_eof()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        with pytest.raises(httpx.ReadTimeout):
            await transport.handle_async_request(request("GET", server.url(), read=0.3))
        await eventually(lambda: server.conns[0].ended.is_set())  # the client closed it
        assert idle(transport, server) == []


async def test_half_body_then_close(transport: FastTransport) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
        conn.close()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        response = await transport.handle_async_request(request("GET", server.url()))
        assert response.status_code == 200
        chunks = []
        with pytest.raises(httpx.RemoteProtocolError):
            async for chunk in response.aiter_raw():
                chunks.append(chunk)
        assert chunks == [b"hello"]
        await response.aclose()
        assert idle(transport, server) == []


async def test_truncated_chunked_body_then_close(transport: FastTransport) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        conn.close()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        response = await transport.handle_async_request(request("GET", server.url()))
        with pytest.raises(httpx.RemoteProtocolError):
            await response.aread()


@pytest.mark.parametrize("garbage", [b"SSH-2.0-OpenSSH_9.6\r\n", b"HTTP/1.1 abc Bad\r\n\r\n", b"\x16\x03\x01\x00\xa5\x01"])
async def test_garbage_instead_of_http(transport: FastTransport, garbage: bytes) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(garbage)
        await conn.wait_eof()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            await transport.handle_async_request(request("GET", server.url()))
        await eventually(lambda: server.conns[0].ended.is_set())
        assert idle(transport, server) == []


async def test_stall_mid_body_is_a_read_timeout(transport: FastTransport) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
        await conn.wait_eof()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        response = await transport.handle_async_request(request("GET", server.url()))
        response.stream.read_timeout = 0.3  # short for the stall only, not for the head, however busy the machine
        stream = response.aiter_raw()
        assert await anext(stream) == b"hello"
        with pytest.raises(httpx.ReadTimeout):
            await anext(stream)
        await response.aclose()


# --- pool hygiene after failures ----------------------------------------------------------------------


def misbehaving() -> RawServer:
    """``/ok`` answers (keep-alive); other paths misbehave on whatever connection they arrive."""

    async def handler(conn: ServerConn) -> None:
        while (r := await conn.read_request()) is not None:
            if r.target == b"/ok":
                await conn.send(ok())
            elif r.target == b"/half":
                await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
                conn.close()
                return
            elif r.target == b"/stall-body":
                await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
                await conn.wait_eof()
            elif r.target == b"/no-answer":
                await conn.wait_eof()
            elif r.target == b"/garbage":
                await conn.send(b"garbage\r\n\r\n")
                await conn.wait_eof()
            elif r.target == b"/big":
                await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (4 << 20))
                for _ in range(64):
                    await conn.send(b"y" * 65536)
            elif r.target == b"/complete-unread":
                await conn.send(ok(b"z" * 1000))

    return RawServer(handler)


async def run_failure(transport: FastTransport, url: str, scenario: str) -> None:
    if scenario in ("no-answer", "garbage"):
        with pytest.raises((httpx.ReadTimeout, httpx.RemoteProtocolError)):
            await transport.handle_async_request(request("GET", url, read=0.3))
        return
    response = await transport.handle_async_request(request("GET", url))
    response.stream.read_timeout = 0.3  # a body that stalls ends in a timeout; the head came at the usual pace
    stream = response.aiter_raw()
    if scenario in ("half", "stall-body"):
        with pytest.raises((httpx.ReadTimeout, httpx.RemoteProtocolError)):
            async for _ in stream:
                pass
    elif scenario == "big":
        await anext(stream)  # read a little, then give up on it
    elif scenario == "complete-unread":
        await eventually(lambda: response.stream.connection.complete)  # the whole body arrived; nobody read it
    await response.aclose()


@pytest.mark.parametrize("scenario", ["half", "stall-body", "no-answer", "garbage", "big", "complete-unread"])
async def test_failed_or_abandoned_connection_is_not_reused(transport: FastTransport, scenario: str) -> None:
    async with asyncio.timeout(GUARD), misbehaving() as server:
        await fetch(transport, "GET", server.url("/ok"))
        assert server.accepts == 1
        await run_failure(transport, server.url(f"/{scenario}"), scenario)  # goes out on the pooled connection
        assert server.requests[-1].conn_index == 0
        assert idle(transport, server) == []
        await eventually(lambda: server.conns[0].ended.is_set())  # closed (by the client, or for /half the server)
        response, body = await fetch(transport, "GET", server.url("/ok"))
        assert body == b"ok"
        assert server.accepts == 2 and server.requests[-1].conn_index == 1
        assert all(c.reusable and not c.closed for c in idle(transport, server))


async def test_aclose_closes_idle_connections() -> None:
    transport = FastTransport()
    async with asyncio.timeout(GUARD), RawServer(respond(together(3))) as server:
        await asyncio.gather(*(fetch(transport, "GET", server.url("/together")) for _ in range(3)))
        assert len(idle(transport, server)) == 3
        assert not any(c.ended.is_set() for c in server.conns)
        await transport.aclose()
        assert transport._idle == {}
        await eventually(lambda: all(c.ended.is_set() and c.saw_eof for c in server.conns))


# --- headers and request line -------------------------------------------------------------------------


async def test_duplicate_response_headers_kept_in_order(transport: FastTransport) -> None:
    wire = b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1; Path=/\r\nX-Mid: m\r\nSet-Cookie: b=2\r\nContent-Length: 0\r\n\r\n"
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: wire)) as server:
        response, _ = await fetch(transport, "GET", server.url())
        assert response.headers.get_list("set-cookie") == ["a=1; Path=/", "b=2"]
        assert [k for k, _ in response.headers.raw] == [b"Set-Cookie", b"X-Mid", b"Set-Cookie", b"Content-Length"]


async def test_reason_phrase(transport: FastTransport) -> None:
    answers = iter([
        b"HTTP/1.1 418 I'm a teapot\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 Fine Thanks\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 503 \r\nContent-Length: 0\r\n\r\n",
    ])
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: next(answers))) as server:
        phrases = []
        for _ in range(3):
            response, _ = await fetch(transport, "GET", server.url())
            phrases.append((response.status_code, response.extensions["reason_phrase"]))
        assert phrases == [(418, b"I'm a teapot"), (200, b"Fine Thanks"), (503, b"")]
        assert server.accepts == 1  # the phrase is per response even on a reused connection


async def test_request_line_keeps_raw_path_and_query(transport: FastTransport) -> None:
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok())) as server:
        await fetch(transport, "GET", server.url("/v1/a%2Fb/c%20d;p?q=a%2Fb&r=%20x&s=%7E&t"), headers={"X-Extra": "1"})
        (r,) = server.requests
        assert r.target == b"/v1/a%2Fb/c%20d;p?q=a%2Fb&r=%20x&s=%7E&t"
        assert r.header(b"host") == b"127.0.0.1:%d" % server.port
        assert r.header(b"x-extra") == b"1"


# --- under httpx.AsyncClient --------------------------------------------------------------------------


async def test_under_async_client() -> None:
    def answer(r: RawRequest) -> bytes:
        return ok(b"%s %s %s" % (r.method.encode(), r.target, r.body))

    async with asyncio.timeout(GUARD), RawServer(respond(answer)) as server:
        async with httpx.AsyncClient(transport=FastTransport(), timeout=2.0) as client:
            response = await client.post(server.url("/p?x=1"), json={"a": 1})
            assert response.text == 'POST /p?x=1 {"a":1}'
            async with client.stream("GET", server.url("/s")) as streamed:
                assert [c async for c in streamed.aiter_bytes()] == [b"GET /s "]
        assert server.accepts == 1
        await eventually(lambda: server.conns[0].ended.is_set())  # client close closed the pool


# --- write timeouts and interim answers ------------------------------------------------------------


async def test_upstream_not_reading_body_is_a_write_timeout(transport: FastTransport) -> None:
    async def handler(conn: ServerConn) -> None:
        await asyncio.Event().wait()  # accept, never read

    async with RawServer(handler) as server:
        with pytest.raises(httpx.TimeoutException):
            async with asyncio.timeout(GUARD):  # a TimeoutError from here is not an httpx.TimeoutException
                await transport.handle_async_request(
                    request("POST", server.url(), read=0.3, write=0.3, content=b"x" * (32 << 20))
                )


@pytest.mark.parametrize("same_packet", [False, True])
async def test_interim_1xx_response_is_skipped(transport: FastTransport, same_packet: bool) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    final = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    pooled: list = []

    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(ok())  # sets up the connection the test then watches
        await conn.read_request()
        if same_packet:
            await conn.send(interim + final)
        else:
            await conn.send(interim)
            await eventually(lambda: pooled[0].interim == 1)  # the client has parsed it: the final comes apart
            await conn.send(final)
        await conn.wait_eof()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        await fetch(transport, "GET", server.url())
        pooled.extend(idle(transport, server))
        response, body = await fetch(transport, "POST", server.url(), content=b"x", headers={"expect": "100-continue"})
        assert (response.status_code, response.extensions["reason_phrase"], body) == (200, b"OK", b"ok")
        assert server.accepts == 1


# --- TLS -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A throwaway self-signed certificate for localhost (openssl comes with Debian's ca-certificates)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    return cert, key


async def test_https_upstream_is_verified_and_kept_alive(certificate: tuple[str, str]) -> None:
    cert, key = certificate
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    accepts = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepts
        accepts += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=served)
    url = f"https://localhost:{server.sockets[0].getsockname()[1]}/v1/models"
    trusting = FastTransport(ssl_context=ssl.create_default_context(cafile=cert))
    try:
        async with asyncio.timeout(GUARD):
            for _ in range(3):
                response = await trusting.handle_async_request(httpx.Request("GET", url, extensions=timeouts()))
                assert response.status_code == 200 and b"".join([c async for c in response.stream]) == b"ok"
                await response.aclose()
            assert accepts == 1  # one TLS handshake, then the same connection
            with pytest.raises(CertificateError, match="certificate could not be verified"):  # a ConnectError
                await FastTransport().handle_async_request(httpx.Request("GET", url, extensions=timeouts()))
    finally:
        await trusting.aclose()
        server.close()


# --- unsolicited bytes and final interim answers -------------------------------------------------------


@pytest.mark.parametrize("stray", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",  # a head whose body would swallow the next answer
    b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n",  # a whole answer, the socket left open
    b"HTTP/1.1 2",  # half a status line
])
async def test_unsolicited_bytes_retire_an_idle_connection(transport: FastTransport, stray: bytes) -> None:
    pooled = asyncio.Event()

    async def handler(conn: ServerConn) -> None:
        while (r := await conn.read_request()) is not None:
            await conn.send(ok(b"answer %d" % len(conn.requests)))
            if conn.index == 0:
                await pooled.wait()
                await conn.send(stray)

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        await fetch(transport, "GET", server.url())
        (connection,) = idle(transport, server)
        pooled.set()
        await eventually(lambda: connection.closed)  # retired as the stray bytes arrive, not when next used
        response, body = await fetch(transport, "GET", server.url())
        assert (response.status_code, body) == (200, b"answer 1")
        assert server.accepts == 2 and server.requests[-1].conn_index == 1


async def test_bytes_after_the_answer_in_the_same_write_are_not_taken_for_it(transport: FastTransport) -> None:
    stray = b"HTTP/1.1 500 Smuggled\r\nX-Stray: 1\r\nContent-Length: 0\r\n\r\n"
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: ok(b"first") + stray)) as server:
        response, body = await fetch(transport, "GET", server.url())
        assert (response.status_code, response.extensions["reason_phrase"], body) == (200, b"OK", b"first")
        assert response.headers.raw == [(b"Content-Length", b"5")]
        await fetch(transport, "GET", server.url())
        assert server.accepts == 2  # the connection that carried the stray answer was not reused


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
])
async def test_switching_protocols_unasked_is_refused(transport: FastTransport, answer: bytes) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(answer)
        await conn.wait_eof()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        with pytest.raises(httpx.RemoteProtocolError, match="101"):
            await transport.handle_async_request(request("GET", server.url()))
        await eventually(lambda: server.conns[0].ended.is_set())  # the client closed it
        assert idle(transport, server) == []


async def test_interim_answer_then_close_is_an_error(transport: FastTransport) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        conn.close()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            await transport.handle_async_request(request("GET", server.url()))


async def test_endless_interim_answers_are_cut_off(transport: FastTransport) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        while True:  # until the client hangs up (send raises)
            await conn.send(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        with pytest.raises(httpx.RemoteProtocolError, match="interim"):
            await transport.handle_async_request(request("GET", server.url()))
        await eventually(lambda: server.conns[0].ended.is_set())
        assert idle(transport, server) == []


async def test_a_few_interim_answers_before_the_final_one_are_fine(transport: FastTransport) -> None:
    interim = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: interim * 10 + ok(b"final"))) as server:
        for _ in range(2):
            response, body = await fetch(transport, "GET", server.url())
            assert (response.status_code, response.headers.raw, body) == (200, [(b"Content-Length", b"5")], b"final")
        assert server.accepts == 1


# --- the size of a response head -----------------------------------------------------------------------


async def endless_header_lines(conn: ServerConn) -> None:
    await conn.read_request()
    await conn.send(b"HTTP/1.1 200 OK\r\n")
    while True:  # until the client hangs up (send raises)
        await conn.send(b"X-Filler: " + b"a" * 1000 + b"\r\n")


async def one_endless_header_line(conn: ServerConn) -> None:
    await conn.read_request()
    await conn.send(b"HTTP/1.1 200 OK\r\nX-Long: ")
    while True:  # a value httptools would keep growing in memory until it ends
        await conn.send(b"a" * 8192)


@pytest.mark.parametrize("upstream", [endless_header_lines, one_endless_header_line])
async def test_a_response_head_without_end_is_cut_off(transport: FastTransport, upstream) -> None:
    async with asyncio.timeout(GUARD), RawServer(upstream) as server:
        with pytest.raises(httpx.RemoteProtocolError, match=f"head is larger than {MAX_HEAD_BYTES} bytes"):
            await transport.handle_async_request(request("GET", server.url()))
        await eventually(lambda: server.conns[0].ended.is_set())  # the client closed it
        assert idle(transport, server) == []


async def test_a_large_head_within_the_cap_is_fine_and_its_body_follows_in_the_same_write(transport: FastTransport) -> None:
    headers = b"".join(b"X-Header-%d: %b\r\n" % (i, b"v" * 900) for i in range(60))  # ~55 KiB of head
    body = b"b" * (2 * MAX_HEAD_BYTES)  # the head ends inside one read; what follows it is body, not head
    answer = b"HTTP/1.1 200 OK\r\n" + headers + b"Content-Length: %d\r\n\r\n" % len(body) + body
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: answer)) as server:
        for _ in range(2):
            response, received = await fetch(transport, "GET", server.url())
            assert (response.status_code, len(response.headers), received) == (200, 61, body)
        assert server.accepts == 1


async def test_the_client_gets_a_502_when_the_upstream_head_has_no_end() -> None:
    async with asyncio.timeout(GUARD), RawServer(endless_header_lines) as server:
        app = create_app(Settings(upstream=server.url("/v1"), upstream_timeout=GUARD))  # its own FastTransport
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
                response = await client.get("/v1/models")
        assert response.status_code == 502
        assert response.json()["error"]["code"] == "upstream_unreachable"


# --- transfer codings other than chunked -------------------------------------------------------------------

EVENTS = b"".join(b'data: {"n": %d}\n\n' % n for n in range(200))


def chunked(body: bytes, size: int = 100) -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size)) + b"0\r\n\r\n"


def deflated(body: bytes) -> bytes:
    return zlib.compress(body)


@pytest.mark.parametrize(("coding", "encoded", "framed"), [
    (b"gzip, chunked", gzip.compress(EVENTS), chunked),
    (b"x-gzip, chunked", gzip.compress(EVENTS[:100]) + gzip.compress(EVENTS[100:]), chunked),  # two gzip members
    (b"deflate, chunked", deflated(EVENTS), chunked),
    (b"deflate, gzip, chunked", gzip.compress(deflated(EVENTS)), chunked),
    (b"gzip", gzip.compress(EVENTS), lambda body: body),  # not chunked: the body ends with the connection
], ids=["gzip", "two-members", "deflate", "deflate-then-gzip", "until-close"])
async def test_a_transfer_coding_besides_chunked_is_undone(transport: FastTransport, coding: bytes, encoded: bytes, framed) -> None:
    async def handler(conn: ServerConn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: %b\r\n\r\n%b" % (coding, framed(encoded)))
        conn.close()

    async with asyncio.timeout(GUARD), RawServer(handler) as server:
        response, body = await fetch(transport, "GET", server.url())
    assert body == EVENTS


#: What a transfer-coded bomb decodes to: a thousand times what goes over the wire, and many decoded pieces and
#: loop turns (YIELD_EVERY) long.
BOMB = 16 * 1024 * 1024


async def test_a_transfer_coded_bomb_is_decoded_a_bounded_piece_at_a_time(transport: FastTransport) -> None:
    bomb = gzip.compress(bytes(BOMB))  # 16 MiB of zeros in some 16 KiB
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n" + chunked(bomb, len(bomb))
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: wire)) as server:
        response = await transport.handle_async_request(request("GET", server.url()))
        sizes = [len(piece) async for piece in response.aiter_raw()]
    assert sum(sizes) == BOMB and max(sizes) <= DECODED_PIECE


@pytest.mark.parametrize(("coding", "body", "error"), [
    (b"br, chunked", chunked(b"x"), httpx.RemoteProtocolError),
    (b"chunked, gzip", gzip.compress(b"x"), httpx.RemoteProtocolError),
    (b"gzip, chunked", chunked(b"not gzip at all"), httpx.DecodingError),
    (b"gzip, chunked", chunked(gzip.compress(EVENTS)[:-20]), httpx.DecodingError),  # cut off inside the coding
], ids=["unknown", "chunked-not-last", "corrupt", "truncated"])
async def test_a_transfer_coding_that_cannot_be_undone_is_an_error(transport: FastTransport, coding: bytes, body: bytes, error) -> None:
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: %b\r\nConnection: close\r\n\r\n%b" % (coding, body)
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: wire)) as server:
        with pytest.raises(error):
            await fetch(transport, "GET", server.url())


async def test_the_client_gets_a_transfer_coded_answer_decoded() -> None:
    wire = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
            + chunked(gzip.compress(EVENTS)))
    async with asyncio.timeout(GUARD), RawServer(respond(lambda r: wire)) as server:
        app = create_app(Settings(upstream=server.url("/v1"), upstream_timeout=GUARD))  # its own FastTransport
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
                passed = await client.get("/v1/events")
                streamed = await client.post("/v1/chat/completions", json={"model": "m", "stream": True, "messages": []})
    for response in (passed, streamed):
        assert response.status_code == 200 and "content-encoding" not in response.headers
        assert response.content == EVENTS


async def test_a_transfer_coded_bomb_gives_the_event_loop_a_turn_every_megabyte_it_decodes() -> None:
    """A body already received (so reading it never waits) that decodes to 16 MiB: other clients still get the loop."""

    class Received(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield gzip.compress(bytes(BOMB))

    turns = 0

    async def other_client() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    ticker = asyncio.get_running_loop().create_task(other_client())
    await asyncio.sleep(0)  # the other client is waiting for its turn
    started = turns
    decoded = sum([len(piece) async for piece in Decoded(Received(), [b"gzip"])])
    ticker.cancel()
    assert decoded == BOMB
    assert turns - started >= BOMB // YIELD_EVERY - 1
