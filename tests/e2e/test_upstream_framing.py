"""Upstream answers with unusual framing, through the proxy under real uvicorn, seen from one raw client
connection: the answer must be right, and the client's keep-alive connection must carry the next request.

The upstream is a raw-socket server in the test's loop (tests/support/raw_server.py); the proxy runs under
uvicorn in a thread (tests/support/strict_upstream.serve); the client speaks HTTP/1.1 over one socket, so a
connection the proxy drops is seen as such rather than hidden by a client pool that reconnects.
"""

import asyncio
import contextlib
from collections.abc import AsyncIterator

import orjson
import pytest

from proxy.app import create_app
from proxy.config import Settings
from tests.support.raw_server import RawRequest, RawServer, ServerConn, ok, respond
from tests.support.strict_upstream import serve

GUARD = 30.0  # a hang guard for a whole test; a passing test takes a fraction of a second
CHAT = b"/v1/chat/completions"
CHAT_BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})


class Client:
    """One keep-alive HTTP/1.1 connection to the proxy."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def request(self, method: bytes, target: bytes, body: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
        self.writer.write(b"%b %b HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%b"
                          % (method, target, len(body), body))
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")  # IncompleteReadError: the proxy dropped the connection
        status_line, *lines = head[:-4].split(b"\r\n")
        status = int(status_line.split(b" ")[1])
        headers = {name.strip().lower(): value.strip() for name, value in (line.split(b":", 1) for line in lines)}
        assert b"transfer-encoding" not in headers  # every answer in these tests has a length, or none
        length = 0 if status in (204, 304) else int(headers.get(b"content-length", b"0"))
        return status, headers, await self.reader.readexactly(length)


@contextlib.asynccontextmanager
async def client_through_proxy(upstream: RawServer) -> AsyncIterator[Client]:
    with serve(create_app(Settings(upstream=upstream.url("/v1"), upstream_timeout=GUARD))) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            yield Client(reader, writer)
        finally:
            writer.close()


@pytest.mark.parametrize(("status_line", "kept"), [
    (b"204 No Content", (b"x-answer", b"a")),  # a Content-Length on a 204 breaks RFC 9110, and happens
    (b"304 Not Modified", (b"etag", b'"e1"')),  # a 304 may carry the representation's length
])
async def test_bodiless_answer_with_content_length_keeps_the_client_connection(status_line: bytes, kept: tuple) -> None:
    wire = b"HTTP/1.1 %b\r\n%b: %b\r\nContent-Length: 10\r\n\r\n" % (status_line, *kept)

    def answer(r: RawRequest) -> bytes:
        return ok(b"after") if r.target == b"/v1/files" else wire

    async with asyncio.timeout(GUARD), RawServer(respond(answer)) as upstream, client_through_proxy(upstream) as client:
        for method, target, body in ((b"GET", b"/v1/models", b""), (b"POST", CHAT, CHAT_BODY)):  # passthrough, chat
            status, headers, content = await client.request(method, target, body)
            assert (status, content, headers[kept[0]]) == (int(status_line[:3]), b"", kept[1])
            assert b"content-length" not in headers  # a 204 must not carry one; uvicorn refuses it on either
        status, _, content = await client.request(b"GET", b"/v1/files")  # the same connection carries the next one
        assert (status, content) == (200, b"after")


async def endless_interim(conn: ServerConn) -> None:
    while await conn.read_request() is not None:
        while True:  # until the proxy hangs up (send raises)
            await conn.send(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")


async def unasked_upgrade(conn: ServerConn) -> None:
    while await conn.read_request() is not None:
        await conn.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")


@pytest.mark.parametrize("misbehaviour", [endless_interim, unasked_upgrade])
async def test_no_final_answer_is_a_502_at_once(misbehaviour) -> None:
    async def handler(conn: ServerConn) -> None:
        if conn.index == 0:
            await misbehaviour(conn)
        else:
            await respond(lambda r: ok(b"fine"))(conn)

    async with asyncio.timeout(GUARD), RawServer(handler) as upstream, client_through_proxy(upstream) as client:
        status, _, body = await client.request(b"GET", b"/v1/models")
        assert status == 502 and orjson.loads(body)["error"]["code"] == "upstream_unreachable"
        status, _, body = await client.request(b"GET", b"/v1/models")
        assert (status, body) == (200, b"fine")
