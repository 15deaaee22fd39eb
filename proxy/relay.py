"""Relaying an upstream answer to the client unchanged: status, headers and body bytes as received.

Event streams go out chunk by chunk as they arrive, never buffered, while the dialect's stream reader
(``proxy.dialects.capture.Capture``) reads the tool calls in them; other bodies stream through as raw
bytes. A JSON answer is read once so its tool calls can be remembered, up to ``--max-capture-bytes``: a
larger one is relayed as it arrives, unremembered. A JSON answer or streamed event over ``LARGE_ANSWER_BYTES``
is read into turns in a thread (for a stream, ``ReadAside``; a stream over it has its turns made there too);
what the turns leave out of an answer (``proxy.dialects.capture.bounded``) is logged and counted. When the
client goes away mid-stream the upstream stream is closed at once, not when the next chunk happens to arrive.

Read your writes: the last byte of an answer reaches the client only once the store has the answer's
turns, so a client that answers a tool call the instant the answer ends finds the call remembered on
whichever worker or replica its next request reaches. A JSON body goes out once ``remember`` returned; of
a stream, only the terminal event waits (the chunk in which the reader's ``finished`` turns True; for a
stream without one, the end of the body), every chunk before it has gone out already. ``remember`` is
bounded by the guard (``proxy.memory.guarded``): a slow or failed store delays the end by at most its
timeout, never breaks the relay.

An answer the request path needs to read before deciding what to do with it (an upstream refusal a dialect may
retry) is read with ``peek``, bounded, and then relayed like any other: its body starts again with what was read.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import httpx
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.dialects.capture import LARGE_ANSWER_BYTES, Capture, CaptureLimit, Cut, ReadAside, StreamReader
from proxy.disconnect import ClientGone, client_watch
from proxy.forward import RawHeaders, UpstreamError, async_stream, header_value, is_event_stream, response_headers
from proxy.protocols import error_shape_of
from proxy.state import ProxyState
from proxy.turns import Turn

log = logging.getLogger("toolmend")

#: Keeps an answer's turns in the store: returns once they are there, or once the store's bound is spent;
#: never raises (``GuardedStore.remember``).
Remember = Callable[[list[Turn]], Awaitable[None]]


class StreamRelay:
    """An ASGI response that copies an upstream body to the client as it arrives.

    With a ``reader``, every chunk is fed to it, and ``on_end`` (which stores what it read) runs once: before
    the chunk that finishes the stream goes out, else before the end of the body, else (a stream cut off,
    a client gone) when the relay stops."""

    def __init__(self, upstream: httpx.Response, headers: RawHeaders, reader: StreamReader | None = None,
                 on_end: Callable[[], Awaitable[None]] | None = None, body: AsyncIterator[bytes] | None = None) -> None:
        self.upstream = upstream
        self.headers = headers
        self.reader = reader
        self.on_end = on_end
        self.body = body  # when part of the upstream's body was read already: all of it, from the start

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            with client_watch(receive):
                await send({"type": "http.response.start", "status": self.upstream.status_code, "headers": self.headers})
                reader = self.reader
                # Raw bytes as they arrive, without httpx's re-chunking layer.
                async for chunk in self.body if self.body is not None else async_stream(self.upstream):
                    if reader is not None:
                        reader.feed(chunk)
                        if self.on_end is not None and reader.finished:
                            await self._end()  # the terminal event waits until the store has the turns
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await self._end()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.HTTPError as exc:
            # The status already went out: all that can be done is end the body and say why.
            log.warning("upstream stream ended early: %s", type(exc).__name__)
        except (ClientGone, OSError):
            pass  # the client went away; the finally below closes the upstream
        finally:
            await self.upstream.aclose()
            # Even a cut-off stream may have shown the client complete call ids it will answer.
            await self._end()

    async def _end(self) -> None:
        """``on_end``, the first time only (taken before it runs: a client leaving meanwhile must not run it again)."""
        on_end, self.on_end = self.on_end, None
        if on_end is not None:
            await on_end()


class BrokeOff(Response):
    """The 502 (504) of an upstream that broke off before any of its answer went out, made where only the answer is at
    hand: rendered in the request's error shape (``error_shape_of``) and counted in ``toolmend_upstream_errors_total``
    when it is sent, as every other upstream failure is. A Response, so that the request path returns it as any other."""

    def __init__(self, error: UpstreamError) -> None:
        super().__init__(status_code=error.status)
        self.error = error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: ProxyState = scope["app"].state.proxy
        state.metrics.upstream_errors.labels(self.error.code).inc()
        await self.error.response(error_shape_of(scope))(scope, receive, send)


def stream_through(upstream: httpx.Response, extra_headers: Sequence[tuple[bytes, bytes]] = ()) -> StreamRelay:
    return StreamRelay(upstream, [*response_headers(upstream), *extra_headers])


async def relay_answer(upstream: httpx.Response, capture: Capture, remember: Remember, limit: CaptureLimit,
                       extra_headers: Sequence[tuple[bytes, bytes]] = (), streamed: bool = False) -> Response | StreamRelay:
    """Relay an answer, remembering the tool-call turns ``capture`` reads in a successful one before its end. An event
    stream, or an answer the request said will stream whatever its content type (``streamed``: Gemini's JSON array),
    goes out as it arrives, read by the capture's stream reader; any other is read whole first."""
    relayed = response_headers(upstream)
    headers = [*relayed, *extra_headers]
    if upstream.status_code != 200 or header_value(relayed, b"content-encoding") not in (None, b"identity"):
        return StreamRelay(upstream, headers)
    if streamed or is_event_stream(relayed):
        reader = ReadAside(capture.stream(limit.max_bytes))

        async def remember_stream() -> None:
            if reader.abandoned:
                _gave_up(limit, "stream")
                return
            turns = await asyncio.to_thread(reader.turns) if reader.large else reader.turns()
            limit.trimmed(reader.cut)
            if turns:
                await remember(turns)

        return StreamRelay(upstream, headers, reader, remember_stream, body=reader.body(async_stream(upstream)))
    chunks = aiter(async_stream(upstream))
    read: list[bytes] = []
    try:
        if await _read_into(read, chunks, limit.max_bytes):
            _gave_up(limit, "json")
            return StreamRelay(upstream, headers, body=_chained(read, chunks))
    except httpx.HTTPError as exc:
        await upstream.aclose()
        return BrokeOff(UpstreamError.from_httpx(exc))
    await upstream.aclose()
    body = b"".join(read)
    cut = Cut()
    if len(body) > LARGE_ANSWER_BYTES:
        turns = await asyncio.to_thread(capture.from_json, body, cut)
    else:
        turns = capture.from_json(body, cut)
    limit.trimmed(cut)
    if turns:
        await remember(turns)  # before the body goes out: read your writes
    return ReadWhole(body, upstream.status_code, headers)


class ReadWhole(Response):
    """An answer read whole, sent with its status, headers and body as received (``Response``'s own headers, which
    these replace, are never made)."""

    def __init__(self, body: bytes, status: int, headers: RawHeaders) -> None:
        self.status_code, self.body, self.raw_headers, self.background = status, body, headers, None


class _Replayed(httpx.AsyncByteStream):
    """An answer's body from its start again, once ``peek`` read part or all of it: what was read, then the rest as
    it arrives (or the error that broke the reading off, raised where it happened). Closing it closes the answer's
    own stream, which gives its upstream slot back."""

    def __init__(self, read: list[bytes], stream: httpx.AsyncByteStream, rest: AsyncIterator[bytes] | None,
                 error: httpx.HTTPError | None) -> None:
        self.read, self.stream, self.rest, self.error = read, stream, rest, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read, self.read = self.read, []
        for chunk in read:
            yield chunk
        if self.error is not None:
            raise self.error
        if self.rest is not None:
            async for chunk in self.rest:
                yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


async def peek(upstream: httpx.Response, limit: int, until: Callable[[bytes], bool] | None = None) -> bytes | None:
    """The whole body of an answer when it is at most ``limit`` bytes; else None (larger, or the upstream broke off).
    With ``until`` (fed every chunk read), reading stops at the first chunk it answers True for: what was read by then
    is answered (a stream's first event, which nothing after it is kept waiting for). Either way the answer is still
    relayed as it was received: its body starts again with what was read."""
    stream = async_stream(upstream)
    chunks = aiter(stream)
    read: list[bytes] = []
    try:
        stopped = await _read_into(read, chunks, limit, until)
    except httpx.HTTPError as exc:
        upstream.stream = _Replayed(read, stream, None, exc)
        return None
    upstream.stream = _Replayed(read, stream, chunks if stopped else None, None)
    return None if stopped and until is None else b"".join(read)


async def _read_into(read: list[bytes], chunks: AsyncIterator[bytes], limit: int, until: Callable[[bytes], bool] | None = None) -> bool:
    """Append ``chunks`` to ``read`` until they end (False), come to more than ``limit`` bytes or ``until`` answers True
    for one (True: the rest is left unread). An error reading them is raised with ``read`` holding what came before it."""
    size = 0
    async for chunk in chunks:
        read.append(chunk)
        size += len(chunk)
        if size > limit or (until is not None and until(chunk)):
            return True
    return False


async def _chained(read: list[bytes], rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in read:
        yield chunk
    read.clear()  # the relay holds no more of the answer than the client has not taken yet
    async for chunk in rest:
        yield chunk


def _gave_up(limit: CaptureLimit, reason: str) -> None:
    log.info("upstream answer larger than --max-capture-bytes (%d): relayed without remembering its calls", limit.max_bytes)
    limit.gave_up(reason)
