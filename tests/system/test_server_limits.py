"""Hostile clients against the real server (``python -m proxy serve`` on a loopback port, raw sockets):
header bombs, unfinished heads, stalled bodies, clients that never read, and connection floods."""

import asyncio
import contextlib
import resource
import select
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.processes import HANG_GUARD, ProxyProcess, eventually
from tests.support.raw_server import RawRequest, RawServer, ServerConn, ok

#: Every wait for an outcome is bounded by this (the server's own timeouts in these tests are BOUND).
GENEROUS = HANG_GUARD
#: The server's head, body and send timeouts where a test waits one out: short, the behaviour is the same at any length.
BOUND = "0.5"
#: A trickling client's pause between two pieces: well within BOUND, so that only the bound on the whole can close it.
PACE = float(BOUND) / 5
MIB = 1024 * 1024
UNREACHABLE = "http://127.0.0.1:9/v1"  # for tests whose requests never go upstream


def rss(pid: int) -> int:
    """Resident memory of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@contextlib.contextmanager
def serving(upstream: str, *args: str) -> Iterator[ProxyProcess]:
    with ProxyProcess(upstream, "--memory", "memory://", *args) as proxy:
        yield proxy


def connect(proxy: ProxyProcess, receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(GENEROUS)
    sock.connect(("127.0.0.1", proxy.port))
    return sock


def read_answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset counts as a close), or until GENEROUS."""
    received = b""
    with contextlib.suppress(ConnectionError, TimeoutError):
        while chunk := sock.recv(65536):
            received += chunk
    return received


def head_with(headers: list[tuple[str, str]], target: str = "/healthz") -> bytes:
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers)
    return f"GET {target} HTTP/1.1\r\n{lines}\r\n".encode()


def header_block_size(headers: list[tuple[str, str]], target: str = "/healthz") -> int:
    """What --max-header-bytes counts: the request target and each ``name: value\\r\\n`` line."""
    return len(target) + sum(len(name) + len(value) + 4 for name, value in headers)


# --- header limit -------------------------------------------------------------------------------------------

LIMIT = 4096


def padded_to(total: int) -> list[tuple[str, str]]:
    """Many small headers (none over 100 bytes) whose block adds up to exactly ``total`` bytes."""
    headers = [("host", "127.0.0.1"), ("connection", "close")]
    index = 0
    while header_block_size(headers) < total:
        room = total - header_block_size(headers) - len(f"x-pad-{index}") - 4
        headers.append((f"x-pad-{index}", "p" * max(1, min(80, room))))
        index += 1
    assert header_block_size(headers) == total, "padding overshot"
    return headers


@pytest.mark.parametrize("total, status", [(LIMIT, 200), (LIMIT + 1, 431)])
def test_the_limit_is_on_the_whole_header_block_not_on_one_header(total: int, status: int) -> None:
    headers = padded_to(total)
    assert max(len(value) for _, value in headers) <= 80 and len(headers) > 40
    with serving(UNREACHABLE, "--max-header-bytes", str(LIMIT)) as proxy, connect(proxy) as sock:
        sock.sendall(head_with(headers))
        answer = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 %d " % status), answer[:200]
    if status == 431:
        body = orjson.loads(answer.split(b"\r\n\r\n", 1)[1])
        assert body["error"]["code"] == "headers_too_large"


def many_headers(size: int) -> Iterator[bytes]:
    """Header lines of 1 KiB each, one MiB at a time."""
    line = b"x-bomb: " + b"b" * 1014 + b"\r\n"
    batch = line * (MIB // len(line))
    for _ in range(size // len(batch)):
        yield batch


def one_endless_value(size: int) -> Iterator[bytes]:
    """A single header value that never ends: only the parser's own buffer can hold it."""
    yield b"x-bomb: "
    for _ in range(size // MIB):
        yield b"b" * MIB


def answered(sock: socket.socket) -> bool:
    """The server has sent something, or closed (without waiting)."""
    return bool(select.select([sock], [], [], 0)[0])


@pytest.mark.parametrize("bomb, size", [(many_headers, 100 * MIB), (one_endless_value, 64 * MIB)],
                         ids=["many-headers", "one-endless-value"])
def test_a_header_bomb_is_cut_off_and_memory_stays_bounded(bomb: Callable[[int], Iterator[bytes]], size: int) -> None:
    with serving(UNREACHABLE) as proxy:  # the default limit, 64 KiB
        before = rss(proxy.proc.pid)
        sent = 0
        with connect(proxy) as sock:
            try:
                sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\n")
                for part in bomb(size):
                    if answered(sock):
                        break
                    sock.sendall(part)
                    sent += len(part)
            except (ConnectionError, TimeoutError):
                pass  # cut off while sending: the outcome wanted too
            answer = read_answer(sock)
        grown = rss(proxy.proc.pid) - before
    # Socket buffers on loopback hold a few MiB at most: beyond that the server has read the head past
    # its limit, and by then its answer is there to read.
    assert sent < size, "the whole bomb went in without an answer"
    # The refusal lingers over its answer (server.LINGER_SECONDS) reading and dropping what still comes, so the 431
    # is never lost to a reset.
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "headers_too_large"
    assert grown < 32 * MIB, f"the server grew by {grown / MIB:.0f} MiB"


# --- head timeout -------------------------------------------------------------------------------------------

def trickle_until_closed(sock: socket.socket) -> bool:
    """Send one byte per PACE, as a slowloris client does, until the server closes (True) or GENEROUS passes."""
    sock.settimeout(PACE)
    for _ in range(int(GENEROUS / PACE)):
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            pass
        except ConnectionError:
            return True
        try:
            sock.sendall(b"s")
        except ConnectionError:
            return True
    return False


@pytest.mark.parametrize("workers", ["1", "2"])  # with 2, the limits travel into the worker processes
def test_an_unfinished_head_is_closed_after_the_head_timeout(workers: str) -> None:
    with serving(UNREACHABLE, "--head-timeout", BOUND, "--workers", workers) as proxy, connect(proxy) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
        assert trickle_until_closed(sock), "the unfinished head was still open after the bound"


def test_the_head_timeout_holds_for_every_request_of_a_keep_alive_connection() -> None:
    with serving(UNREACHABLE, "--head-timeout", BOUND) as proxy, connect(proxy) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        answer = b""
        while b'"ok"' not in answer:  # the first answer, complete: the connection stays open for the next
            chunk = sock.recv(65536)
            assert chunk, f"closed after the first answer: {answer!r}"
            answer += chunk
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
        assert trickle_until_closed(sock), "the second request's unfinished head was still open after the bound"


# --- against a raw upstream --------------------------------------------------------------------------------

class Upstream:
    """Answers ``ok``; ``/v1/stream`` streams without end while the proxy reads; ``/v1/held`` waits for
    ``release``; a body that stalls simply stalls (the read waits)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.streams: list[ServerConn] = []

    async def __call__(self, conn: ServerConn) -> None:
        while (request := await conn.read_request()) is not None:
            await self.answer(conn, request)

    async def answer(self, conn: ServerConn, request: RawRequest) -> None:
        if request.target == b"/v1/large":
            self.streams.append(conn)
            await conn.send(b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: %d\r\n\r\n" % (256 * MIB))
            for _ in range(256):  # far more than the socket buffers between it and a client that never reads
                await conn.send(b"l" * MIB)
            return
        if request.target == b"/v1/stream":
            self.streams.append(conn)
            await conn.send(b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n%b\r\n" % (64 * 1024, b"s" * 64 * 1024)
            for _ in range(4096):  # 256 MiB at most; the proxy stops taking it long before
                await conn.send(chunk)
            await conn.send(b"0\r\n\r\n")
            return
        if request.target == b"/v1/held":
            await self.release.wait()
        await conn.send(ok(b'{"object": "list", "data": []}'))


@contextlib.asynccontextmanager
async def upstream_and_proxy(*args: str) -> AsyncIterator[tuple[Upstream, RawServer, ProxyProcess]]:
    upstream = Upstream()
    async with RawServer(upstream) as server:
        with serving(server.url("/v1"), *args) as proxy:
            yield upstream, server, proxy


async def test_a_stalled_pass_through_body_is_a_408_and_frees_its_upstream_slot() -> None:
    async with upstream_and_proxy("--client-timeout", BOUND, "--max-upstream-connections", "1") as (_, server, proxy):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"POST /v1/files HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 1000\r\n\r\n" + b"x" * 10)
        async with asyncio.timeout(GENEROUS):
            answer = await reader.read()  # the 408 closes the connection
        writer.close()
        async with httpx.AsyncClient(base_url=proxy.url, timeout=GENEROUS) as client:
            after = await client.get("/v1/models")
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    assert after.status_code == 200


@pytest.mark.parametrize("target", [b"/v1/large", b"/v1/stream"])
async def test_a_client_that_stops_reading_frees_its_upstream_slot_after_the_send_timeout(target: bytes) -> None:
    # --client-timeout, the bound on a request body, has nothing to do with it.
    limits = ("--send-timeout", BOUND, "--client-timeout", "600", "--max-upstream-connections", "1")
    async with upstream_and_proxy(*limits) as (upstream, _, proxy):
        with connect(proxy, receive_buffer=4096) as idle_reader:
            idle_reader.sendall(b"GET %b HTTP/1.1\r\nhost: 127.0.0.1\r\nx-request-id: req-idle\r\n\r\n" % target)  # and never reads
            await eventually(lambda: bool(upstream.streams), "the answer started")
            await eventually(upstream.streams[0].ended.is_set, "the proxy letting go of the upstream answer")
            async with httpx.AsyncClient(base_url=proxy.url, timeout=GENEROUS) as client:
                after = await client.get("/v1/models")
                metrics = (await client.get("/metrics")).text
            log = proxy.log()
    assert after.status_code == 200
    assert "toolmend_send_timeouts_total 1.0" in metrics
    assert "(--send-timeout): connection closed (request req-idle)" in log


async def test_sigterm_drains_the_request_in_flight_and_exits_0() -> None:
    async with upstream_and_proxy() as (upstream, server, proxy):
        async with httpx.AsyncClient(base_url=proxy.url, timeout=GENEROUS) as client:
            held = asyncio.create_task(client.get("/v1/held"))
            await eventually(lambda: any(r.target == b"/v1/held" for r in server.requests), "the held request upstream")
            proxy.proc.terminate()
            await eventually(lambda: "Shutting down" in proxy.log(), "the proxy stopping")
            upstream.release.set()
            drained = await held
            async with asyncio.timeout(GENEROUS):
                code = await asyncio.to_thread(proxy.proc.wait)
            log = proxy.log()
    assert drained.status_code == 200 and drained.json() == {"object": "list", "data": []}
    assert code == 0, log[-2000:]


def closed_by_server(sock: socket.socket) -> bool:
    if not answered(sock):
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionError:
        return True


async def test_at_the_connection_cap_slow_clients_make_room_and_requests_in_flight_are_kept() -> None:
    cap, slow_count = 32, 100
    async with upstream_and_proxy("--max-connections", str(cap), "--head-timeout", "600") as (upstream, server, proxy):
        async with httpx.AsyncClient(base_url=proxy.url, timeout=GENEROUS) as client:
            held = asyncio.create_task(client.get("/v1/held"))  # in flight while the flood comes
            await eventually(lambda: any(r.target == b"/v1/held" for r in server.requests), "the held request upstream")
            slow = [connect(proxy) for _ in range(slow_count)]
            try:
                for sock in slow:
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # and never finishes its head
                await eventually(lambda: sum(map(closed_by_server, slow)) >= slow_count - cap + 1, "slow clients closed")
                async with httpx.AsyncClient(base_url=proxy.url, timeout=GENEROUS) as fresh:
                    legitimate = await fresh.get("/v1/models")
                upstream.release.set()
                kept = await held
            finally:
                for sock in slow:
                    sock.close()
    assert legitimate.status_code == 200
    assert kept.status_code == 200 and kept.json() == {"object": "list", "data": []}


async def test_when_every_connection_has_a_request_in_flight_a_new_one_gets_503_and_none_is_dropped() -> None:
    cap = 16
    async with upstream_and_proxy("--max-connections", str(cap)) as (upstream, server, proxy):
        limits = httpx.Limits(max_connections=cap)
        async with httpx.AsyncClient(base_url=proxy.url, timeout=GENEROUS, limits=limits) as client:
            held = [asyncio.create_task(client.get("/v1/held")) for _ in range(cap)]
            await eventually(lambda: sum(r.target == b"/v1/held" for r in server.requests) == cap, "every request in flight")
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(b"GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            async with asyncio.timeout(GENEROUS):
                refused = await reader.read()
            writer.close()
            upstream.release.set()
            kept = await asyncio.gather(*held)
    assert refused.startswith(b"HTTP/1.1 503 "), refused[:200]
    assert orjson.loads(refused.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "server_busy"
    assert [answer.status_code for answer in kept] == [200] * cap


async def test_a_body_that_trickles_in_past_the_client_timeout_is_a_408() -> None:
    """Each piece comes well within --client-timeout, the whole body does not: the bound is on the body, not on a
    pause (a client sending a byte now and then would otherwise hold its upstream slot for as long as it likes)."""
    async with upstream_and_proxy("--client-timeout", BOUND) as (_, server, proxy):
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"POST /v1/files HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100000\r\n\r\n")
        answer, pieces = b"", 0
        async with asyncio.timeout(GENEROUS):
            while not answer and pieces < 100000 // 10:
                writer.write(b"x" * 10)
                pieces += 1
                with contextlib.suppress(TimeoutError):  # a piece every PACE: the pace of the trickle, and a look for the answer
                    answer = await asyncio.wait_for(reader.read(65536), PACE)
            answer += await reader.read()  # the 408 closes the connection
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    assert pieces > 1  # not refused at its first piece: the time the pieces took together ran out


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def ask(connection: Connection, target: bytes = b"/healthz") -> bytes:
    """Send a GET and read its whole answer (a Content-Length body), leaving the connection open; or what came
    before the server closed it."""
    reader, writer = connection
    writer.write(b"GET %b HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n" % target)
    return await answer_on(reader)


async def answer_on(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(GENEROUS):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return b""
        length = next(int(line.partition(b":")[2]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        return head + await reader.readexactly(length)


async def test_at_the_connection_cap_a_refused_connection_goes_before_an_idle_keep_alive_one() -> None:
    """The refused one has had its answer and is only lingering over it; an idle one may send its next request."""
    cap = 16
    async with upstream_and_proxy("--max-connections", str(cap), "--head-timeout", "600") as (upstream, server, proxy):
        kept = [await asyncio.open_connection("127.0.0.1", proxy.port) for _ in range(cap)]
        held = [asyncio.create_task(ask(connection, b"/v1/held")) for connection in kept]
        await eventually(lambda: sum(r.target == b"/v1/held" for r in server.requests) == cap, "every request in flight")
        refused = await asyncio.open_connection("127.0.0.1", proxy.port)
        assert (await ask(refused)).startswith(b"HTTP/1.1 503 ")  # over the cap with every connection busy
        upstream.release.set()
        assert [answer[:13] for answer in await asyncio.gather(*held)] == [b"HTTP/1.1 200 "] * cap  # now idle, kept alive
        newcomer = await asyncio.open_connection("127.0.0.1", proxy.port)  # over the cap again: one connection must go
        assert (await ask(newcomer)).startswith(b"HTTP/1.1 200 ")
        again = [await ask(connection) for connection in kept]  # none of them was the one
        for _, writer in [*kept, refused, newcomer]:
            writer.close()
    assert [answer[:13] for answer in again] == [b"HTTP/1.1 200 "] * cap


def soft_open_files(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit")


@pytest.mark.parametrize("hard", [8192, 600])
def test_open_file_limit_is_raised_to_what_the_limits_need(hard: int) -> None:
    """The default caps need ~1,600 descriptors; a stock soft limit of 1,024 would make accept() fail first."""
    needed = 1000 + 1 + 512 + 64  # --max-connections, the one over it, --max-upstream-connections, spare

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    with ProxyProcess(UNREACHABLE, "--memory", "memory://", preexec_fn=low_soft_limit) as proxy:
        limit = soft_open_files(proxy.proc.pid)
        log = proxy.log()
    if hard >= needed:
        assert limit == needed and "open-file limit" not in log
    else:  # cannot be raised past the hard limit: raised as far as it goes, and the operator is told
        assert limit == hard and f"the open-file limit ({hard}, the hard limit) is below the {needed}" in log
