"""The ASGI layer that watches every request: its id, its metrics, and its one log line.

Handlers add what only they know (repairs, tenant, upstream status and timings) to the request's
``RequestLine`` in ``scope["state"]``; this layer writes the line once the response (stream included)
has ended, so a request is logged exactly once whatever path it took.
"""

import logging
import re
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.dialects import DIALECTS, error_shape
from proxy.errors import Render
from proxy.logs import RequestLine
from proxy.metrics import Metrics

log = logging.getLogger("toolmend.access")

REQUEST_ID = b"x-request-id"
# Returned under its own name: upstreams (OpenAI among them) answer with their own x-request-id, which
# passes through unchanged.
ECHOED_ID = b"x-toolmend-request-id"
#: A client's request id is echoed and logged only when it is a plain token of this shape (UUIDs, ``req_...``,
#: trace ids); anything else is replaced by a fresh id rather than trusted.
REQUEST_ID_SHAPE = re.compile(rb"[A-Za-z0-9_.:/+=@-]{1,128}")
QUIET_PATHS = frozenset(("/healthz", "/readyz", "/metrics"))  # probes: counted, logged at debug only


#: A path below an API version: OpenAI's and Anthropic's ``/v1/``, Gemini's ``/v1beta/``...
VERSIONED = re.compile(r"/v1(?:beta1?|alpha)?/")


def route_of(path: str) -> str:
    """The metrics label of a path (never its query): the dialect that repairs it, else ``passthrough`` below a version;
    a route prefix (``/mistral/v1/...``) counts like the path under it."""
    for dialect in DIALECTS:
        if dialect.repairs(path):
            return dialect.name
    if VERSIONED.search(path):
        return "passthrough"
    return path.strip("/") if path in QUIET_PATHS else "other"


def request_id_of(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's ``x-request-id`` when it is a plain token, else a fresh one."""
    for name, value in headers:
        if name.lower() == REQUEST_ID and REQUEST_ID_SHAPE.fullmatch(value):
            return value.decode()
    return uuid.uuid4().hex


def line_of(scope: Scope) -> RequestLine:
    """The request's line; a throwaway one when the observing layer is not in front (a bare handler in a test)."""
    line = scope.get("state", {}).get("request_line")
    return line if line is not None else RequestLine("-", scope.get("method", ""), scope.get("path", ""))


def error_shape_of(scope: Scope) -> Render:
    """The request's error shape, decided once from its path (``dialects.error_shape``) and kept in its scope: every
    error toolmend makes for the request after its head arrived comes in this shape, whichever layer makes it."""
    state = scope.setdefault("state", {})
    shape = state.get("error_shape")
    if shape is None:
        shape = state["error_shape"] = error_shape(scope["path"], scope["headers"])
    return shape


def observe_upstream(metrics: Metrics, line: RequestLine, route: str, answer: Any, started: float) -> None:
    """The upstream's answer head arrived: its status and time to first byte."""
    elapsed = time.perf_counter() - started
    metrics.upstream_first_byte_seconds.labels(route).observe(elapsed)
    line.upstream_status = answer.status_code
    line.first_byte_ms = round(elapsed * 1000, 3)
    line.upstream_started = started


class Observer:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope["headers"])
        line = RequestLine(request_id, scope["method"], scope["path"])
        scope.setdefault("state", {})["request_line"] = line
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

        route = route_of(scope["path"])
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
                self.metrics.upstream_seconds.labels(route).observe(now - line.upstream_started)
            self.metrics.requests.labels(route, str(line.status or 500)).inc()
            level = logging.DEBUG if scope["path"] in QUIET_PATHS else logging.INFO
            log.log(level, "request", extra={"request": line.fields()})
