"""Relaying an upstream answer to the client unchanged: status, headers and body bytes as received.

Event streams go out chunk by chunk as they arrive, never buffered, while the tool calls in them are
captured; other bodies stream through as raw bytes. A chat-completions JSON answer is read once so its
tool calls can be remembered, up to ``--max-capture-bytes``: a larger one is relayed as it arrives,
unremembered. When the client goes away mid-stream the upstream stream is closed at
once, not when the next chunk happens to arrive.
"""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import httpx
from starlette.background import BackgroundTask
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.dialects.capture import CaptureLimit
from proxy.dialects.chat.capture import StreamCapture, turns_from_json
from proxy.disconnect import ClientGone, client_watch
from proxy.forward import RawHeaders, UpstreamError, async_stream, response_headers
from proxy.turns import Turn

log = logging.getLogger("toolmend")

Remember = Callable[[list[Turn]], Awaitable[None]]


class StreamRelay:
    """An ASGI response that copies an upstream body to the client as it arrives."""

    def __init__(self, upstream: httpx.Response, headers: RawHeaders, capture: StreamCapture | None = None,
                 on_end: Callable[[], Awaitable[None]] | None = None, body: AsyncIterator[bytes] | None = None) -> None:
        self.upstream = upstream
        self.headers = headers
        self.capture = capture
        self.on_end = on_end
        self.body = body  # when part of the upstream's body was read already: all of it, from the start

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            with client_watch(receive):
                await send({"type": "http.response.start", "status": self.upstream.status_code, "headers": self.headers})
                feed = self.capture.feed if self.capture is not None else None
                # Raw bytes as they arrive, without httpx's re-chunking layer.
                async for chunk in self.body if self.body is not None else async_stream(self.upstream):
                    if feed is not None:
                        feed(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.HTTPError as exc:
            # The status already went out: all that can be done is end the body and say why.
            log.warning("upstream stream ended early: %s", type(exc).__name__)
        except (ClientGone, OSError):
            pass  # the client went away; the finally below closes the upstream
        finally:
            await self.upstream.aclose()
            # Even a cut-off stream may have shown the client complete call ids it will answer.
            if self.on_end is not None:
                await self.on_end()


def stream_through(upstream: httpx.Response, extra_headers: Sequence[tuple[bytes, bytes]] = ()) -> StreamRelay:
    return StreamRelay(upstream, [*response_headers(upstream), *extra_headers])


async def relay_chat(upstream: httpx.Response, remember: Remember, limit: CaptureLimit,
                     extra_headers: Sequence[tuple[bytes, bytes]] = ()) -> Response | StreamRelay:
    """Relay a chat-completions answer and remember the tool-call turns of a successful one."""
    headers = [*response_headers(upstream), *extra_headers]
    if upstream.status_code != 200 or upstream.headers.get("content-encoding", "identity") != "identity":
        return StreamRelay(upstream, headers)
    if upstream.headers.get("content-type", "").startswith("text/event-stream"):
        capture = StreamCapture(limit.max_bytes)

        async def remember_stream() -> None:
            if capture.abandoned:
                _gave_up(limit, "stream")
                return
            turns = capture.turns()
            if turns:
                await remember(turns)

        return StreamRelay(upstream, headers, capture, remember_stream)
    chunks = aiter(async_stream(upstream))
    read: list[bytes] = []
    size = 0
    try:
        async for chunk in chunks:
            read.append(chunk)
            size += len(chunk)
            if size > limit.max_bytes:
                _gave_up(limit, "json")
                return StreamRelay(upstream, headers, body=_chained(read, chunks))
    except httpx.HTTPError as exc:
        await upstream.aclose()
        return UpstreamError.from_httpx(exc).response()
    await upstream.aclose()
    body = b"".join(read)
    # Remembered once the answer is sent, so it costs the client no time; the store makes the turn
    # visible to this process's recalls at once, before this connection can carry another request.
    response = Response(body, upstream.status_code, background=BackgroundTask(_remember_answer, body, remember))
    response.raw_headers = headers
    return response


async def _chained(read: list[bytes], rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in read:
        yield chunk
    read.clear()  # the relay holds no more of the answer than the client has not taken yet
    async for chunk in rest:
        yield chunk


def _gave_up(limit: CaptureLimit, reason: str) -> None:
    log.info("upstream answer larger than --max-capture-bytes (%d): relayed without remembering its calls", limit.max_bytes)
    limit.gave_up(reason)


async def _remember_answer(body: bytes, remember: Remember) -> None:
    turns = turns_from_json(body)
    if turns:
        await remember(turns)
