"""The ASGI layer that watches every request: its id, its metrics, and its one log line.

Handlers add what only they know (repairs, tenant, upstream status and timings) to the request's
``RequestLine`` in ``scope["state"]``; this layer writes the line once the response (stream included)
has ended, so a request is logged exactly once whatever path it took.
"""

import logging
import os
import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.logs import RequestLine, log_request
from proxy.metrics import Metrics, labelled
from proxy.protocols import QUIET_PATHS, Protocols

log = logging.getLogger("toolmend.access")

REQUEST_ID = b"x-request-id"
# Returned under its own name: upstreams (OpenAI among them) answer with their own x-request-id, which
# passes through unchanged.
ECHOED_ID = b"x-toolmend-request-id"
#: A client's request id is echoed and logged only when it is a plain token of this shape (UUIDs, ``req_...``,
#: trace ids); anything else is replaced by a fresh id rather than trusted.
REQUEST_ID_SHAPE = re.compile(rb"[A-Za-z0-9_.:/+=@-]{1,128}")


def request_id_of(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's ``x-request-id`` when it is a plain token, else a fresh one."""
    for name, value in headers:
        if name.lower() == REQUEST_ID and REQUEST_ID_SHAPE.fullmatch(value):
            return value.decode()
    return fresh_id()


def fresh_id() -> str:
    """What ``uuid.uuid4().hex`` answers (16 random bytes, version 4, RFC 4122 variant), made without a ``UUID``."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    return raw.hex()


def line_of(scope: Scope) -> RequestLine:
    """The request's line; a throwaway one when the observing layer is not in front (a bare handler in a test)."""
    line = scope.get("state", {}).get("request_line")
    return line if line is not None else RequestLine("-", scope.get("method", ""), scope.get("path", ""))


def observe_upstream(metrics: Metrics, line: RequestLine, route: str, answer: Any, started: float) -> None:
    """The upstream's answer head arrived: its status and time to first byte."""
    elapsed = time.perf_counter() - started
    labelled(metrics.upstream_first_byte_seconds, route).observe(elapsed)
    line.upstream_status = answer.status_code
    line.first_byte_ms = round(elapsed * 1000, 3)
    line.upstream_started = started


class Observer:
    """Decides the request's protocol (``Protocols``) once its head arrives, keeps it in the scope beside the log line,
    counts the request under the protocol's label and writes the line when the answer has ended."""

    def __init__(self, app: ASGIApp, metrics: Metrics, protocols: Protocols) -> None:
        self.app = app
        self.metrics = metrics
        self.protocols = protocols

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope["headers"])
        line = RequestLine(request_id, scope["method"], scope["path"])
        protocol = self.protocols.of(scope["path"], scope["headers"])
        state = scope.setdefault("state", {})
        state["request_line"], state["protocol"] = line, protocol
        echo = (ECHOED_ID, request_id.encode())

        streaming = False

        async def send_with_id(message: Message) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                line.status = message["status"]
                headers = message.get("headers", ())
                streaming = any(n.lower() == b"content-type" and v.startswith(b"text/event-stream") for n, v in headers)
                if streaming:
                    self.metrics.open_streams.inc()
                message["headers"] = [*headers, echo]
            await send(message)

        route = protocol.label
        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.in_flight.dec()
            if streaming:
                self.metrics.open_streams.dec()
            now = time.perf_counter()
            line.duration_ms = round((now - line.started) * 1000, 3)
            if line.upstream_started is not None:
                line.upstream_ms = round((now - line.upstream_started) * 1000, 3)
                labelled(self.metrics.upstream_seconds, route).observe(now - line.upstream_started)
            labelled(self.metrics.requests, route, str(line.status or 500)).inc()
            level = logging.DEBUG if scope["path"] in QUIET_PATHS else logging.INFO
            log_request(log, level, line)
