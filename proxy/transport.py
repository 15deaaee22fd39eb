"""A lean HTTP/1.1 transport under httpx, for the one upstream a proxy talks to all day.

httpx stays the client API (respx mocks it, tests and code speak it), but its default transport spends
most of a proxy's CPU in connection-pool bookkeeping that walks every pooled connection on every request
(encode/httpx#3215; measured in docs/benchmarks.md). This transport keeps idle keep-alive connections per
origin on a stack (last used, first reused: warm connections stay warm), writes each request with one
call, and parses responses with httptools, the parser uvicorn uses. Bodies stream both ways with flow
control; nothing is buffered beyond what the reader has not consumed yet. An upstream out of step (bytes when
no request is out, a 101 nobody asked for, interim answers without end) fails at once and its connection is
retired, never reused.

Behind an outbound proxy (proxy/egress.py decides which requests take one), an https upstream is reached
through a CONNECT tunnel with TLS end to end, a plain http one with absolute-form requests to the proxy;
either way a connection serves one upstream origin, so the pool stays keyed by origin (for a given
transport an origin always takes the same proxy). Without a proxy nothing of this runs.

Failures map onto httpx's exceptions (ConnectError, ConnectTimeout, ReadTimeout, RemoteProtocolError,
ProxyError...) so callers handle them as they would with httpx's own transport.
"""

import asyncio
import logging
import os
import ssl
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, NoReturn, cast

import httptools
import httpx

from proxy.egress import Egress, Proxy
from proxy.transfer_coding import Decoded, listed, transfer_codings

log = logging.getLogger("toolmend")

Origin = tuple[str, str, int]
#: The request extension holding the request's origin where its maker knows it (an ``Upstream`` of proxy/forward.py: every
#: URL it makes has its base URL's), so that it is not worked out of the URL again on every request.
ORIGIN = "toolmend.origin"


def origin_of(url: httpx.URL) -> Origin:
    """The URL's scheme, host and port (the scheme's default port when it gives none)."""
    return (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))

#: Pause reading from the upstream when this much body is waiting for the client.
READ_HIGH_WATER = 1024 * 1024
#: Interim (1xx) answers accepted before the final one. A real server sends one 100 Continue, a few 103 Early
#: Hints, or a 102 Processing now and then during a long job; one that keeps sending them will never answer,
#: and without a cap it would hold the request until the read timeout.
MAX_INTERIM = 100
#: Bytes an upstream's response head (status line and headers, with any interim answers before it) may take,
#: and a proxy's answer to CONNECT. Real heads are well under 8 KiB, a provider's with all its rate-limit and
#: tracing headers included; an upstream sending header lines without end would otherwise grow the parser's
#: buffers until the read timeout (minutes) ran out. 64 KiB is the client side's own --max-header-bytes default.
MAX_HEAD_BYTES = 64 * 1024


class CertificateError(httpx.ConnectError):
    """The upstream's TLS certificate failed verification; the message says why, fit for the client."""


class OutboundProxyError(httpx.ProxyError):
    """The outbound proxy could not be reached or would not carry the request. The message says which (with the
    proxy's answer), never the proxy's address or credentials: it is fit for the client."""


class _Refused(Exception):
    """Raised in a parser callback to stop httptools mid-buffer; the reason is already on the connection."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; carries one exchange at a time."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.write_timeout: float | None = None
        self.error: httpx.TransportError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._begin()

    def _begin(self) -> None:
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.complete = False
        self.received_any = False
        self.interim = 0
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.keep_alive = True
        self.head_bytes = 0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport is a full Transport; asyncio.Protocol types the argument as the base.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.received_any = True
        try:
            if self.head_done or self.head_bytes + len(data) <= MAX_HEAD_BYTES:
                self.head_bytes += len(data)
                self.parser.feed_data(data)
                return
            # Feed only what fits: httptools keeps an unfinished header line in memory however long it grows.
            room = MAX_HEAD_BYTES - self.head_bytes
            self.head_bytes = MAX_HEAD_BYTES
            self.parser.feed_data(data[:room])
            if not self.head_done:
                self._fail(httpx.RemoteProtocolError(f"the upstream's response head is larger than {MAX_HEAD_BYTES} bytes"))
                return
            self.parser.feed_data(data[room:])
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:  # _Refused comes wrapped in one
            self._fail(httpx.RemoteProtocolError(f"invalid HTTP response from the upstream: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.head_done and not self.complete and self._ends_at_close():
            self.complete = True  # no length, not chunked: the body ended with the connection
        elif not self.complete:
            self.error = self.error or httpx.RemoteProtocolError("the upstream closed the connection mid-response")
        self._wake()
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    def pause_writing(self) -> None:
        self._drain = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)
        self._drain = None

    # httptools callbacks
    def on_message_begin(self) -> None:
        if self.complete:
            # An answer nobody asked for: after this exchange's (even in the same packet) or while the
            # connection sat in the pool. Parsed, it would pass for the next request's answer, or swallow it
            # as its body; the connection is out of step with the upstream and cannot be used again.
            self._refuse("the upstream sent an answer to no request")

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self.status == 101:
            # The proxy never asks for an upgrade (Upgrade is hop-by-hop and dropped), so there is no protocol
            # to switch to; httptools would stop at it either way.
            self._refuse("the upstream answered 101 Switching Protocols to a request that asked for no upgrade")
        if 100 <= self.status < 200:
            self.interim += 1
            if self.interim > MAX_INTERIM:
                self._refuse(f"the upstream sent more than {MAX_INTERIM} interim (1xx) answers and no final one")
            return  # an interim answer (100 Continue, 103 Early Hints): the real one follows
        self.head_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > READ_HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if not self.head_done:  # the end of an interim answer: forget its head, keep reading
            self.reason, self.headers = b"", []
            return
        # Only meaningful inside the parser's callbacks: llhttp resets it once the message is done.
        self.keep_alive = self.keep_alive and self.parser.should_keep_alive()
        self.complete = True
        self._wake()

    # helpers
    def _ends_at_close(self) -> bool:
        """No length and not chunked: the body is what comes until the connection closes (RFC 9112 6.3)."""
        names = {name.lower() for name, _ in self.headers}
        return b"content-length" not in names and listed(self.headers)[-1:] != [b"chunked"]

    def _fail(self, exc: httpx.TransportError) -> None:
        self.error = self.error or exc  # the first failure is the one worth reporting
        self.close()
        self._wake()

    def _refuse(self, reason: str) -> NoReturn:
        self._fail(httpx.RemoteProtocolError(reason))
        raise _Refused(reason)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self, timeout: float | None) -> None:
        """Until the parser has news (``_wake``); TimeoutError after ``timeout``. A timer that fails the waiter rather
        than ``asyncio.timeout``, whose context manager (a timer that cancels the task, then its cancellation checked and
        taken back) costs several times as much on every request."""
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        expiry = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if expiry is not None:
                expiry.cancel()

    async def write(self, data: bytes) -> None:
        """Write, then wait (up to the write timeout) while the upstream is not taking data."""
        if self.closed or self.transport is None:
            raise httpx.WriteError("the upstream connection is closed")
        self.transport.write(data)
        if self._drain is not None:
            try:
                async with asyncio.timeout(self.write_timeout):
                    await self._drain
            except TimeoutError:
                self.close()
                raise httpx.WriteTimeout("the upstream stopped taking the request body") from None

    def take_chunk(self) -> bytes:
        chunk = self.chunks.popleft()
        self.buffered -= len(chunk)
        if self.paused and self.buffered < READ_HIGH_WATER // 2 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return chunk

    def head_only(self) -> None:
        self.complete = True
        self.keep_alive = False

    @property
    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.closed and self.error is None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _expire(waiter: "asyncio.Future[None]") -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, connection: _Connection, pool: "FastTransport", read_timeout: float | None, request: httpx.Request) -> None:
        self.connection = connection
        self.request = request
        self.pool = pool
        self.read_timeout = read_timeout
        self.released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self.connection
        while True:
            if connection.chunks:
                yield connection.take_chunk()
            elif connection.complete:
                break
            elif connection.error is not None:
                connection.error.request = self.request
                raise connection.error
            else:
                try:
                    await connection.wait(self.read_timeout)
                except TimeoutError:
                    connection.close()
                    raise httpx.ReadTimeout("the upstream stopped sending the response body", request=self.request) from None
        self._release()

    async def aclose(self) -> None:
        self._release()

    def _release(self) -> None:
        if self.released:
            return
        self.released = True
        if self.connection.reusable and not self.connection.chunks:
            self.pool.give_back(self.connection)
        else:
            self.connection.close()


class FastTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 with keep-alive, over TCP or TLS. ``max_idle`` bounds idle connections per origin.

    ``egress`` says which upstreams are reached through an outbound proxy (none by default); ``ca_file``
    is the CA bundle trusted for upstream TLS instead of the default (``upstream_tls_context``)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, max_idle: int = 128, egress: Egress | None = None,
                 ca_file: str | None = None) -> None:
        self.ssl_context = ssl_context
        self.ca_file = ca_file
        self.max_idle = max_idle
        self.egress = egress or Egress()
        self._idle: dict[Origin, list[_Connection]] = {}
        self._proxies: dict[Origin, Proxy | None] = {}  # the egress's answer per origin, decided once

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        origin = request.extensions.get(ORIGIN) or origin_of(request.url)
        if origin not in self._proxies:
            self._proxies[origin] = self.egress.proxy_for(*origin)
        proxy = self._proxies[origin]
        forwarding = proxy if origin[0] == "http" else None  # plain http: requests go to the proxy itself
        head = _request_head(request, forwarding)
        body = _replayable_body(request)
        while True:
            connection = self._take_idle(origin)
            reused = connection is not None
            if connection is None:
                connection = await self._connect(origin, proxy, timeouts.get("connect"), request)
            try:
                await self._exchange(connection, head, body if body is not None else request.stream, timeouts, request)
                break
            except (httpx.RemoteProtocolError, httpx.WriteError):
                # A pooled connection the upstream had already closed: retry once on a fresh one, but only
                # when it cannot have seen the request (nothing received) and the body can be sent again.
                if reused and body is not None and not connection.received_any:
                    continue
                raise
        if forwarding is not None and connection.status == 407:
            connection.close()  # the proxy's answer, not the upstream's: the client must not take it for one
            raise _refused(forwarding, 407, connection.reason, request)
        if request.method == "HEAD":
            connection.head_only()  # the parser cannot know a HEAD answer has no body
        try:
            codings = transfer_codings(connection.headers)
        except httpx.RemoteProtocolError as exc:
            connection.close()
            exc.request = request
            raise
        stream: httpx.AsyncByteStream = _ResponseStream(connection, self, timeouts.get("read"), request)
        return httpx.Response(
            connection.status,
            headers=connection.headers,
            stream=Decoded(stream, codings) if codings else stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": connection.reason},
        )

    async def _exchange(self, connection: _Connection, head: bytes, body: Any, timeouts: dict, request: httpx.Request) -> None:
        connection._begin()
        connection.write_timeout = timeouts.get("write")
        try:
            await self._send_body(connection, head, body, request)
            while not connection.head_done:
                if connection.error is not None:
                    raise connection.error
                await connection.wait(timeouts.get("read"))
        except TimeoutError:
            connection.close()
            raise httpx.ReadTimeout("the upstream did not answer in time", request=request) from None
        except BaseException:
            connection.close()
            raise

    @staticmethod
    async def _send_body(connection: _Connection, head: bytes, body: Any, request: httpx.Request) -> None:
        if isinstance(body, bytes):
            await connection.write(head + body)
        elif request.headers.get("transfer-encoding") == "chunked":
            await connection.write(head)
            async for piece in body:
                if piece:
                    await connection.write(b"%x\r\n%b\r\n" % (len(piece), piece))
            await connection.write(b"0\r\n\r\n")
        else:  # a streamed body of declared Content-Length goes out as it is
            await connection.write(head)
            async for piece in body:
                await connection.write(piece)

    async def _connect(self, origin: Origin, proxy: Proxy | None, timeout: float | None, request: httpx.Request) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        where = f"{host}:{port}" if proxy is None else f"{host}:{port} through the outbound proxy {proxy}"
        try:
            tls = None
            if scheme == "https":  # inside: an SSL_CERT_FILE that cannot be read is this upstream's 502, not a crash
                tls = self.ssl_context = self.ssl_context or upstream_tls_context(self.ca_file)
            async with asyncio.timeout(timeout):  # the whole of it: TCP, the proxy's answer, the TLS handshake
                if proxy is None:
                    _, connection = await loop.create_connection(
                        lambda: _Connection(origin), host, port, ssl=tls, server_hostname=host if tls else None
                    )
                elif tls is None:
                    _, connection = await _to_proxy(loop, lambda: _Connection(origin), proxy, request)
                else:
                    connection = await _tunnel(loop, origin, proxy, tls, request)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {where} timed out", request=request) from None
        except ssl.SSLCertVerificationError as exc:
            raise CertificateError(f"The upstream's TLS certificate could not be verified ({exc.verify_message}).",
                                   request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {where}: {exc}", request=request) from None
        return connection

    def _take_idle(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        return None

    def give_back(self, connection: _Connection) -> None:
        idle = self._idle.setdefault(connection.origin, [])
        if len(idle) < self.max_idle:
            idle.append(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


def upstream_tls_context(ca_file: str | None = None) -> ssl.SSLContext:
    """The CAs trusted for upstream TLS: ``ca_file`` (--upstream-ca-file), else SSL_CERT_FILE or SSL_CERT_DIR,
    else certifi's bundle: httpx's order, as every provider SDK follows it."""
    if ca_file:
        return ssl.create_default_context(cafile=ca_file)
    return httpx.create_ssl_context()  # reads SSL_CERT_FILE / SSL_CERT_DIR (trust_env)


class _ProxyAnswer(asyncio.Protocol):
    """Reads the outbound proxy's answer to CONNECT: its head only, at most MAX_HEAD_BYTES of it."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.head: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        if self.head.done():
            return  # the body of a refusal, or bytes a tunnel should not carry yet: _tunnel says which
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end >= 0:
            self.head.set_result(bytes(self.buffer[:end]))
            del self.buffer[:end + 4]
        elif len(self.buffer) > MAX_HEAD_BYTES:
            self.head.set_exception(OutboundProxyError(f"The outbound proxy's answer to CONNECT is larger than {MAX_HEAD_BYTES} bytes."))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.head.done():
            self.head.set_exception(OutboundProxyError("The outbound proxy closed the connection without answering CONNECT."))


async def _tunnel(loop: asyncio.AbstractEventLoop, origin: Origin, proxy: Proxy, tls: ssl.SSLContext,
                  request: httpx.Request) -> _Connection:
    """A connection to ``origin`` through a CONNECT tunnel (RFC 9110 9.3.6), TLS with the upstream inside it."""
    _, host, port = origin
    raw, answer = await _to_proxy(loop, _ProxyAnswer, proxy, request)
    try:
        authority = _authority(request.url.raw_host, port)
        lines = [b"CONNECT ", authority, b" HTTP/1.1\r\nHost: ", authority, b"\r\n"]
        if proxy.authorization is not None:
            lines += (b"Proxy-Authorization: ", proxy.authorization, b"\r\n")
        raw.write(b"".join(lines) + b"\r\n")
        status_line = (await answer.head).partition(b"\r\n")[0]
        version, _, rest = status_line.partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not (version.startswith(b"HTTP/1.") and code.isdigit() and len(code) == 3):
            raise OutboundProxyError("The outbound proxy answered CONNECT with something other than HTTP.", request=request)
        if not 200 <= int(code) < 300:
            raise _refused(proxy, int(code), reason, request)
        if answer.buffer:  # the upstream speaks only after our TLS hello: these bytes came from the proxy
            raise OutboundProxyError("The outbound proxy sent data after its answer to CONNECT.", request=request)
        connection = _Connection(origin)
        connection.transport = await loop.start_tls(raw, connection, tls, server_hostname=host)
        return connection
    except BaseException:
        raw.close()
        raise


async def _to_proxy(loop: asyncio.AbstractEventLoop, factory: Any, proxy: Proxy, request: httpx.Request) -> Any:
    try:
        return await loop.create_connection(factory, proxy.host, proxy.port)
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else type(exc).__name__  # asyncio's own text names the address
        raise OutboundProxyError(f"The outbound proxy could not be reached ({why}).", request=request) from None


def _refused(proxy: Proxy, status: int, reason: bytes, request: httpx.Request) -> OutboundProxyError:
    """The proxy said no: logged for the operator with the proxy's masked URL, told the client by status only."""
    text = reason.decode("ascii", "replace")[:100].strip()
    text = "".join(c if c.isprintable() else "?" for c in text)  # a hostile proxy's reason reaches logs and clients
    log.warning("the outbound proxy %s answered %d %s instead of carrying a request to %s", proxy, status, text, request.url.host)
    answered = f"{status} {text}" if text else str(status)
    return OutboundProxyError(f"The outbound proxy refused to carry the request to the upstream: it answered {answered}.", request=request)


def _authority(raw_host: bytes, port: int) -> bytes:
    """``host:port`` for CONNECT and its Host header; an IPv6 address in brackets."""
    return b"[%b]:%d" % (raw_host, port) if b":" in raw_host else b"%b:%d" % (raw_host, port)


def _request_head(request: httpx.Request, proxy: Proxy | None = None) -> bytes:
    """The request line and headers. To a proxy (a plain http upstream behind one) the target is the absolute
    URL (RFC 9112 3.2.2) and the proxy's credentials go along."""
    url = request.url
    target = url.raw_path if proxy is None else b"%b://%b%b" % (url.raw_scheme, url.netloc, url.raw_path)
    lines = [request.method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:  # httpx already set Host, and Content-Length or chunked framing
        lines += (name, b": ", value, b"\r\n")
    if proxy is not None and proxy.authorization is not None:
        lines += (b"Proxy-Authorization: ", proxy.authorization, b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def _replayable_body(request: httpx.Request) -> bytes | None:
    """The body when it is already in memory (and so can be sent again); None when it streams."""
    try:
        return request.content
    except httpx.RequestNotRead:
        return None
