"""A tiny raw-socket HTTP/1.1 server for transport tests: handlers read requests and write exact bytes.

Each accepted connection gets a ``ServerConn`` and runs ``handler(conn)``; the handler decides the framing,
the timing and the misbehaviour. The server counts accepts, records every request it decoded, and notes
when a connection ended (the peer closed it, reset it, or the handler returned).
"""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass
class RawRequest:
    method: str
    target: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    chunk_sizes: list[int] | None  # sizes of the chunks when the body came chunked, else None
    conn_index: int

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


class ServerConn:
    def __init__(self, server: "RawServer", index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.index = index
        self.reader = reader
        self.writer = writer
        self.requests: list[RawRequest] = []
        self.ended = asyncio.Event()  # the handler finished: peer EOF / reset, or it returned
        self.saw_eof = False

    async def read_request(self) -> RawRequest | None:
        """The next request, body decoded; None when the client closed the connection."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise
            self.saw_eof = True
            return None
        except ConnectionError:
            self.saw_eof = True
            return None
        lines = head[:-4].split(b"\r\n")
        method, target, version = lines[0].split(b" ")
        assert version == b"HTTP/1.1", lines[0]
        headers = [tuple(part.strip() for part in line.split(b":", 1)) for line in lines[1:]]
        request = RawRequest(method.decode(), target, headers, b"", None, self.index)  # type: ignore[arg-type]
        if (request.header(b"transfer-encoding") or b"").lower() == b"chunked":
            assert request.header(b"content-length") is None, "both Content-Length and chunked"
            request.chunk_sizes, parts = [], []
            while True:
                size_line = await self.reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    while await self.reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailers
                    break
                parts.append(await self.reader.readexactly(size))
                request.chunk_sizes.append(size)
                assert await self.reader.readexactly(2) == b"\r\n", "chunk not followed by CRLF"
            request.body = b"".join(parts)
        elif (length := request.header(b"content-length")) is not None:
            request.body = await self.reader.readexactly(int(length))
        self.requests.append(request)
        self.server.requests.append(request)
        return request

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def wait_eof(self) -> None:
        """Discard whatever comes until the client closes."""
        try:
            while await self.reader.read(65536):
                pass
        except ConnectionError:
            pass
        self.saw_eof = True

    def close(self) -> None:
        self.writer.close()


Handler = Callable[[ServerConn], Awaitable[None]]


class RawServer:
    def __init__(self, handler: Handler, host: str = "127.0.0.1") -> None:
        self.handler = handler
        self.host = host  # a loopback address: 127.0.0.1 or ::1
        self.conns: list[ServerConn] = []
        self.requests: list[RawRequest] = []
        self.errors: list[BaseException] = []
        self._tasks: set[asyncio.Task] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def accepts(self) -> int:
        return len(self.conns)

    def url(self, path: str = "/") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = ServerConn(self, len(self.conns), reader, writer)
        self.conns.append(conn)
        try:
            await self.handler(conn)
        except (ConnectionError, asyncio.IncompleteReadError):
            conn.saw_eof = True
        except asyncio.CancelledError:
            pass  # teardown; returning (not re-raising) keeps asyncio.streams from logging the cancellation
        except BaseException as exc:  # surfaced by __aexit__: a server-side assertion is a test failure
            self.errors.append(exc)
        finally:
            conn.ended.set()
            writer.close()
            self._tasks.discard(task)

    async def __aenter__(self) -> "RawServer":
        self._server = await asyncio.start_server(self._on_client, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for conn in self.conns:
            conn.writer.close()
        await self._server.wait_closed()
        if self.errors and exc_info[0] is None:
            raise self.errors[0]


def respond(fn: Callable[[RawRequest], bytes | Awaitable[bytes]]) -> Handler:
    """A keep-alive handler: answer each request with ``fn(request)`` until the client closes."""

    async def handler(conn: ServerConn) -> None:
        while (request := await conn.read_request()) is not None:
            answer = fn(request)
            if not isinstance(answer, bytes):
                answer = await answer
            await conn.send(answer)

    return handler


def ok(body: bytes = b"ok", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%b\r\n%b" % (len(body), extra, body)
