"""The ASGI layer that watches every request: its id, its metrics, and its one log line.

Handlers add what only they know (repairs, tenant, upstream status and timings) to the request's
``RequestLine`` in ``scope["state"]``; this layer writes the line once the response (stream included)
has ended, so a request is logged exactly once whatever path it took.
"""

import logging
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.logs import RequestLine
from proxy.metrics import Metrics

log = logging.getLogger("toolmend.access")

REQUEST_ID = b"x-request-id"
MAX_REQUEST_ID = 128
QUIET_PATHS = frozenset(("/healthz", "/readyz", "/metrics"))  # probes: counted, logged at debug only


def route_of(path: str) -> str:
    if path == "/v1/chat/completions":
        return "chat"
    if path.startswith("/v1/"):
        return "passthrough"
    return path.strip("/") if path in QUIET_PATHS else "other"


def request_id_of(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's ``x-request-id`` when it is a sane token, else a fresh one."""
    for name, value in headers:
        if name.lower() == REQUEST_ID and 0 < len(value) <= MAX_REQUEST_ID and value.isascii() and value.decode().isprintable():
            return value.decode()
    return uuid.uuid4().hex


def line_of(scope: Scope) -> RequestLine | None:
    return scope.get("state", {}).get("request_line")


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
        echo = (REQUEST_ID, request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                line.status = message["status"]
                message["headers"] = [*message.get("headers", ()), echo]
            await send(message)

        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.in_flight.dec()
            line.duration_ms = round((time.perf_counter() - line.started) * 1000, 3)
            self.metrics.requests.labels(route_of(scope["path"]), str(line.status or 500)).inc()
            level = logging.DEBUG if scope["path"] in QUIET_PATHS else logging.INFO
            log.log(level, "request", extra={"request": line.fields()})
