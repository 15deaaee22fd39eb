"""The client side of the proxy's connections: uvicorn's httptools protocol, with limits that hold while a
request is still arriving, so what a client can hold (memory, file descriptors, upstream slots) is set by
the settings, not by the client.

- The head: its request target and header lines may take ``--max-header-bytes``, counted as they are
  parsed (and, for a header the parser is still buffering, as the bytes arrive). Over the limit the
  client gets a 431 at once; nothing more of its input is parsed or kept.
- A head must be complete within ``--head-timeout`` of the connection opening or the previous answer
  ending; a slow or silent client is then closed (uvicorn's own keep-alive timer covers only silence).
- A client that takes none of its answer for ``--send-timeout`` (nginx's ``send_timeout``: the time between two
  writes the client accepted, not the whole answer) is disconnected, logged and counted
  (``toolmend_send_timeouts_total``): the relay sees the disconnect (``disconnect.client_watch``), closes the
  upstream stream and frees its upstream slot, whatever the answer (a relayed stream or body, an error).
- At ``--max-connections`` open connections, a new one closes the connection that has waited longest for
  its head (a slowloris or an idle keep-alive one; before them, one refused and lingering over its
  answer), never one whose request is in flight; only when every connection has a request in flight is
  the new one refused (503). So at most one connection over the limit is ever open.

Counts are per server process: with ``--workers`` each worker keeps its own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import resource
from dataclasses import dataclass
from typing import cast

from starlette.types import Scope
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from proxy.config import Settings
from proxy.errors import error_body
from proxy.metrics import SEND_TIMEOUTS
from proxy.observe import line_of

log = logging.getLogger("toolmend")

#: How long a refused client gets to read its answer and close before it is cut (nginx's lingering_timeout).
#: Closing at once could reset the connection while the client is still sending, and lose the answer.
LINGER_SECONDS = 5.0


@dataclass(frozen=True)
class ServerLimits:
    max_header_bytes: int
    head_timeout: float
    send_timeout: float
    max_connections: int

    @classmethod
    def of(cls, settings: Settings) -> ServerLimits:
        return cls(settings.max_header_bytes, settings.head_timeout, settings.send_timeout, settings.max_connections)


class Connections:
    """One server's open connections: how many, and which may be closed to make room."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.open = 0
        # Insertion order is waiting order. Refused connections lingering over their answer go first.
        self.refused: dict[GuardedHttpProtocol, None] = {}
        self.waiting: dict[GuardedHttpProtocol, None] = {}

    def to_close_first(self) -> GuardedHttpProtocol | None:
        return next(iter(self.refused), None) or next(iter(self.waiting), None)


#: Descriptors a worker needs besides client and upstream connections: listening sockets, the memory store,
#: log and metrics files, the event loop's own.
SPARE_DESCRIPTORS = 64


def descriptors_needed(settings: Settings) -> int:
    """Open files one worker may need at its limits: every client connection (and the one over the cap),
    every upstream slot of every route, and a margin."""
    upstreams = 1 + len(settings.routes)
    return settings.max_connections + 1 + settings.max_upstream_connections * upstreams + SPARE_DESCRIPTORS


def raise_descriptor_limit(settings: Settings) -> None:
    """Raise the soft open-file limit to what the settings need (up to the hard limit), else say so.

    A stock soft limit of 1024 is below the default --max-connections plus --max-upstream-connections: at
    the limits, accept() and connect() would fail with EMFILE and legitimate clients with them.
    """
    needed = descriptors_needed(settings)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning("the open-file limit (%d, the hard limit) is below the %d that --max-connections %d and "
                    "--max-upstream-connections %d may need: raise it (ulimit -n, or the container's nofile) or "
                    "lower them, else clients may be refused when the limits are reached",
                    soft, needed, settings.max_connections, settings.max_upstream_connections)


def http_protocol(settings: Settings) -> functools.partial[GuardedHttpProtocol]:
    """What to give uvicorn as ``http=``. It is pickled into each worker, where it counts for that worker."""
    return functools.partial(GuardedHttpProtocol, connections=Connections(ServerLimits.of(settings)))


class GuardedHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args, connections: Connections, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.client_connections = connections
        self.limits = connections.limits
        self.counted = False  # in client_connections.open
        self.refused = False  # answered with an error: input is dropped from now on
        self.heads_begun = 0
        self.head_open = False
        self.head_bytes = 0  # request target and header lines of the head being parsed
        self.head_unparsed = 0  # bytes of whole chunks received while that head stayed unfinished
        self.deadline: asyncio.TimerHandle | None = None  # closes the connection: head timeout or lingering
        self.write_deadline: asyncio.TimerHandle | None = None

    # The connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A TCP server's protocol always gets a full Transport; asyncio.Protocol types the argument as the base.
        super().connection_made(cast(asyncio.Transport, transport))
        connections = self.client_connections
        connections.open += 1
        self.counted = True
        if connections.open > self.limits.max_connections:
            victim = connections.to_close_first()
            if victim is None:  # still counted, and the first to go when the next one comes
                self._refuse(503, f"toolmend is at its limit of {self.limits.max_connections} open connections, each with a "
                                  "request in flight (--max-connections); retry shortly.", "server_busy")
                return
            victim._close()
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return  # lingering: read and dropped
        begun = self.heads_begun
        super().data_received(data)
        if self.head_open and self.heads_begun == begun and not self.refused:
            # The whole chunk belongs to one head that is still unfinished (the parser may be holding a
            # header it has not handed over yet): it counts too, so memory stays bounded by the limit.
            self.head_unparsed += len(data)
            self._check_head(self.head_unparsed)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self._await_head()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.write_deadline is not None:
            self.write_deadline.cancel()
        self.write_deadline = self.loop.call_later(self.limits.send_timeout, self._stopped_reading)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.write_deadline is not None:
            self.write_deadline.cancel()
            self.write_deadline = None

    def send_400_response(self, msg: str) -> None:
        if not self.refused:  # after a refusal the parser is no longer fed; a stray error has nothing to add
            super().send_400_response(msg)

    # Parser callbacks: after a refusal the rest of the chunk being parsed is ignored

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.heads_begun += 1
        self.head_open = True
        self.head_bytes = self.head_unparsed = 0

    def on_url(self, url: bytes) -> None:
        if self.refused:
            return
        self.head_bytes += len(url)
        if self._check_head(self.head_bytes):
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.refused:
            return
        self.head_bytes += len(name) + len(value) + 4  # "name: value\r\n"
        if self._check_head(self.head_bytes):
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self.refused:
            return
        self.head_open = False
        self._head_arrived()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self.refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self.refused:
            super().on_message_complete()

    # The limits

    def _check_head(self, size: int) -> bool:
        """True while the head is within the limit; past it, the client is answered 431."""
        if size <= self.limits.max_header_bytes:
            return True
        log.info("a request head went over %d bytes (--max-header-bytes): answered 431", self.limits.max_header_bytes)
        self._refuse(431, f"The request target and headers take more than {self.limits.max_header_bytes} bytes; this proxy "
                          "accepts at most that (--max-header-bytes).", "headers_too_large")
        return False

    def _await_head(self) -> None:
        self.client_connections.waiting.pop(self, None)
        self.client_connections.waiting[self] = None
        self._cancel_deadline()
        self.deadline = self.loop.call_later(self.limits.head_timeout, self._head_too_slow)

    def _head_arrived(self) -> None:
        self.client_connections.waiting.pop(self, None)
        self._cancel_deadline()

    def _head_too_slow(self) -> None:
        self.deadline = None
        log.debug("a request head did not arrive within %g s (--head-timeout): connection closed", self.limits.head_timeout)
        self._close()

    def _stopped_reading(self) -> None:
        self.write_deadline = None
        in_flight = self.cycle is not None and not self.cycle.response_complete
        request = line_of(cast(Scope, self.cycle.scope)).request_id if in_flight else "-"
        log.info("a client took none of its answer for %g s (--send-timeout): connection closed (request %s)",
                 self.limits.send_timeout, request)
        SEND_TIMEOUTS.inc()
        self.transport.abort()  # close() would wait for the unread answer to drain, which it never will

    def _refuse(self, status: int, message: str, code: str) -> None:
        """Answer with an error and stop reading requests; the client gets LINGER_SECONDS to read it and go."""
        self.refused = True
        self.client_connections.waiting.pop(self, None)
        self._cancel_deadline()
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.abort()  # an answer is being written on this connection: an error cannot go in between
            return
        self.client_connections.refused[self] = None
        body = error_body(message, code=code)
        self.transport.write(b"".join((
            STATUS_LINE[status], b"content-type: application/json\r\ncontent-length: ", str(len(body)).encode(),
            b"\r\nconnection: close\r\n\r\n", body,
        )))
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.deadline = self.loop.call_later(LINGER_SECONDS, self.transport.abort)

    def _close(self) -> None:
        self._forget()
        if self.transport.get_write_buffer_size():
            self.transport.abort()  # close() would wait for a client that is not reading
        else:
            self.transport.close()

    def _forget(self) -> None:
        """No longer counted against --max-connections, and no timer left running."""
        if self.counted:
            self.counted = False
            self.client_connections.open -= 1
        self.client_connections.waiting.pop(self, None)
        self.client_connections.refused.pop(self, None)
        self._cancel_deadline()
        if self.write_deadline is not None:
            self.write_deadline.cancel()
            self.write_deadline = None

    def _cancel_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
