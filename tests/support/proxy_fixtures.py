"""Shared helpers for the proxy's unit tests: the app inside its lifespan, respx as the upstream,
scripted upstream byte streams, SSE chunk builders and a raw ASGI caller for timing-sensitive tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import orjson
from starlette.applications import Starlette

from proxy.app import create_app
from proxy.config import Settings
from proxy.memory import Store
from proxy.state import ProxyState
from proxy.tenant import credential, tenant_id
from tests.support.client_tls import TLS

UPSTREAM = "http://upstream.test/v1"
CLIENT_KEY = "sk-client-secret-0123456789"
AUTH = {"authorization": f"Bearer {CLIENT_KEY}"}


def make_settings(**overrides: Any) -> Settings:
    return Settings(**{"upstream": UPSTREAM, **overrides})


def tenant_for(key: str = CLIENT_KEY, upstream: str = UPSTREAM) -> str:
    return tenant_id(credential([(b"authorization", f"Bearer {key}".encode())]), upstream)


@dataclass
class Proxy:
    app: Starlette
    client: httpx.AsyncClient

    @property
    def state(self) -> ProxyState:
        return self.app.state.proxy


def build_app(settings: Settings | None = None, store: Store | None = None) -> Starlette:
    """The proxy app on httpx's stock transport, which respx mocks (whatever the app's default is)."""
    return create_app(settings or make_settings(), transport=httpx.AsyncHTTPTransport(verify=TLS), store=store)


@contextlib.asynccontextmanager
async def running_proxy(settings: Settings | None = None, store: Store | None = None,
                        raise_app_exceptions: bool = True) -> AsyncIterator[Proxy]:
    """The proxy app, its lifespan started, and an HTTP client talking to it in-process."""
    app = build_app(settings, store)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
        async with httpx.AsyncClient(transport=transport, base_url="http://proxy.test") as client:
            yield Proxy(app, client)


@contextlib.asynccontextmanager
async def started(app: Starlette) -> AsyncIterator[Starlette]:
    async with app.router.lifespan_context(app):
        yield app


class ScriptedStream(httpx.AsyncByteStream):
    """An upstream body: yields its items in order. An ``anyio.Event`` item waits for the event, an
    exception item is raised, and ``hang`` waits forever after the last item. Records being closed."""

    def __init__(self, items: list[Any], hang: bool = False) -> None:
        self.items = items
        self.hang = hang
        self.closed = anyio.Event()
        self.yielded = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for item in self.items:
            if isinstance(item, anyio.Event):
                await item.wait()
            elif isinstance(item, BaseException):
                raise item
            else:
                self.yielded += 1
                yield item
        if self.hang:
            await anyio.sleep_forever()

    async def aclose(self) -> None:
        self.closed.set()


def sse_response(stream: ScriptedStream, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers={"content-type": "text/event-stream", **(headers or {})}, stream=stream)


def event(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices}
    if usage is not None:
        body["usage"] = usage
    return body


def delta(index: int = 0, **fields: Any) -> dict[str, Any]:
    return {"index": index, "delta": fields, "finish_reason": None}


def call(cid: str, name: str = "weather", arguments: str = '{"city": "Paris"}') -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def completion(*choice_calls: list[dict[str, Any]] | None, content: str | None = None) -> dict[str, Any]:
    """A ``chat.completion`` body with one choice per argument (a list of calls, or None for plain text)."""
    choices = []
    for index, calls in enumerate(choice_calls or (None,)):
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        choices.append({"index": index, "message": message, "finish_reason": "tool_calls" if calls else "stop"})
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "choices": choices}


def orphan_history(cid: str, result: str = "18C") -> list[dict[str, Any]]:
    """A history whose assistant ``tool_calls`` were dropped by the client: the tool result is an orphan."""
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "tool", "tool_call_id": cid, "content": result},
    ]


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The OpenAI error object of a response, checking the shape on the way."""
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


@dataclass
class AsgiCall:
    """A direct ASGI call: every message the app sent, and when the client should go away."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    disconnect: anyio.Event = field(default_factory=anyio.Event)
    on_send: Callable[[dict[str, Any]], Awaitable[None]] | None = None

    @property
    def status(self) -> int:
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return next(m["headers"] for m in self.sent if m["type"] == "http.response.start")

    @property
    def body_chunks(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body" and m.get("body")]

    @property
    def finished(self) -> bool:
        return any(m["type"] == "http.response.body" and not m.get("more_body", False) for m in self.sent)


async def call_asgi(app: Starlette, call_: AsgiCall, method: str, path: str, headers: list[tuple[bytes, bytes]],
                    body_parts: list[bytes | anyio.Event], query: bytes = b"") -> None:
    """Run one HTTP request through ``app``. Body parts are sent one ``http.request`` each (an event item
    waits before the next part); after the body, ``receive`` blocks until ``call_.disconnect`` is set."""
    parts = list(body_parts)

    async def receive() -> dict[str, Any]:
        while parts:
            part = parts.pop(0)
            if isinstance(part, anyio.Event):
                await part.wait()
                continue
            more = any(not isinstance(p, anyio.Event) for p in parts)
            return {"type": "http.request", "body": part, "more_body": more}
        await call_.disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        call_.sent.append(message)
        if call_.on_send is not None:
            await call_.on_send(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
        "headers": [(b"host", b"proxy.test"), *headers], "client": ("127.0.0.1", 50000), "server": ("proxy.test", 80),
    }
    await app(scope, receive, send)
