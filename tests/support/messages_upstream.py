"""A scripted strict Anthropic Messages upstream for end-to-end tests.

``make_messages_upstream()`` returns a Starlette app plus a :class:`MessagesRecorder`. Every
``POST /v1/messages`` is checked by :mod:`messages_validator` (the AM-* rules of the Messages catalogue)
against what this server minted, and a violation is answered with its status and Anthropic's error
envelope (``{"type": "error", "error": {...}, "request_id": "req_…"}``, plus a ``request-id`` header).
Valid requests get a deterministic *scripted Claude* answer:

* the last message is a user message that does not start with a ``tool_result`` (a new turn), and the
  request has ``tools`` -> when ``thinking`` is on (``enabled`` or ``adaptive``) a thinking block whose
  signature is unique and remembered (``recorder.state``), with ``redacted=True`` a ``redacted_thinking``
  block after it, then the ``preamble`` text (if any), then N parallel ``tool_use`` blocks (default 2;
  header ``x-test-parallel-calls: N`` overrides): ids ``toolu_`` + 24 alphanumerics, call ``i`` names
  ``tools[i % len(tools)]`` with input ``{"city": CITIES[i], "n": i + 1}``; ``stop_reason: "tool_use"``.
* the turn goes on with tool results (the last user messages start with ``tool_result`` blocks) -> the text
  ``"Received K tool results."`` (K = the leading results), no new thinking (it is the same assistant turn),
  ``stop_reason: "end_turn"``.
* anything else -> (thinking, when on, for a new turn) the text ``"Hello from the strict Messages upstream."``.

``"stream": true`` answers the real event sequence (``event:`` lines; ``message_start``, per block
``content_block_start`` with the block's skeleton, a ``ping`` after the first start, ``content_block_delta``
with ``thinking_delta`` / ``signature_delta`` / ``text_delta`` / ``input_json_delta`` in pieces,
``content_block_stop``; then ``message_delta`` and ``message_stop``), each event its own write.

``profile`` plays an Anthropic-compatible server: ``anthropic`` (signed thinking, ``caller`` on tool_use as
Claude sends it), ``kimi`` (thinking with ``signature: ""``), ``deepseek`` and ``zai`` (thinking without ``signature``);
the validator runs the same profile. ``POST /v1/messages/count_tokens`` validates (without ``max_tokens``)
and answers ``{"input_tokens": N}``; ``GET /v1/models`` lists ``claude-strict-test``; any other path is a
404 ``not_found_error`` naming the method and path. Every request on every path is recorded.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
import random
import string
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.dialects.messages.blocks import Block, content_blocks, is_tool_result, is_tool_use

from .messages_validator import PROFILES, Profile, ServerState, Violation, check
from .strict_upstream import CITIES, PARALLEL_HEADER, Received, Recorder, _split

__all__ = ["DEFAULT_MODEL", "MessagesRecorder", "make_messages_upstream", "sse_events"]

DEFAULT_MODEL = "claude-strict-test"
HELLO = "Hello from the strict Messages upstream."
_ALNUM = string.ascii_letters + string.digits
_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


@dataclass
class MessagesRecorder(Recorder):
    """What the Messages upstream saw and sent. Safe to read from the test thread while the server runs.

    ``requests``: every request on every path (``Received.path`` tells them apart), rejected ones too;
    ``rejections``: the error bodies answered; ``responses``: each answered ``message`` object (the JSON form,
    also for streamed answers); ``emitted_turns``: the whole ``content`` of each answer that called tools.
    ``state`` is the server's memory of minted thinking blocks; unlike the lists, :meth:`reset` keeps it,
    as a real server keeps accepting the signatures it issued."""

    state: ServerState = field(default_factory=ServerState)

    @property
    def emitted_calls(self) -> list[Block]:
        """The ``tool_use`` blocks of every answer, in order."""
        with self._lock:
            return [block for turn in self.emitted_turns for block in turn if is_tool_use(block)]


def _error(status: int, body: dict[str, Any], request_id: str) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers={"request-id": request_id})


def _envelope(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}


def _leading_results(messages: list[Any]) -> int:
    """How many ``tool_result`` blocks open the trailing run of user messages (0 when it is a new turn)."""
    start = len(messages)
    while start > 0 and isinstance(messages[start - 1], dict) and messages[start - 1].get("role") == "user":
        start -= 1
    count = 0
    for message in messages[start:]:
        for block in content_blocks(message):
            if not is_tool_result(block):
                return count
            count += 1
    return count


def _skeleton(block: Block) -> Block:
    """The block as ``content_block_start`` carries it: the streamed fields empty, every other key in place."""
    out = dict(block)
    kind = block["type"]
    if kind == "text":
        out["text"] = ""
    elif kind == "thinking":
        out["thinking"] = ""
        if "signature" in out:
            out["signature"] = ""
    elif kind in ("tool_use", "server_tool_use"):
        out["input"] = {}
    return out


def _deltas(block: Block, pieces: int) -> list[dict[str, Any]]:
    kind = block["type"]
    if kind == "text":
        return [{"type": "text_delta", "text": piece} for piece in _split(block["text"], pieces)]
    if kind == "thinking":
        out = [{"type": "thinking_delta", "thinking": piece} for piece in _split(block["thinking"], pieces)]
        if block.get("signature"):
            out.append({"type": "signature_delta", "signature": block["signature"]})
        return out
    if kind in ("tool_use", "server_tool_use"):
        # Claude opens with an empty piece, then the JSON text in pieces (the live recording of docs/provider-rules.md section 6.3).
        text = json.dumps(block["input"], ensure_ascii=False)
        return [{"type": "input_json_delta", "partial_json": ""}] + [
            {"type": "input_json_delta", "partial_json": piece} for piece in _split(text, pieces)
        ]
    return []  # redacted thinking and server blocks arrive whole in their start event


def sse_events(message: dict[str, Any], pieces: int) -> list[tuple[str, dict[str, Any]]]:
    """The (event name, data) sequence Claude streams for ``message`` (its JSON form)."""
    start = {key: value for key, value in message.items() if key not in ("content", "stop_reason", "stop_sequence", "usage")}
    start.update(content=[], stop_reason=None, stop_sequence=None, usage={"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1})
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": _skeleton(block)}))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events.extend(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in _deltas(block, pieces))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


async def _sse(events: list[tuple[str, dict[str, Any]]]) -> AsyncIterator[bytes]:
    for name, data in events:
        yield b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
        await asyncio.sleep(0)  # separate writes, so clients see real chunk boundaries


def make_messages_upstream(
    *,
    parallel_calls: int = 2,
    seed: int | None = None,
    profile: Profile = "anthropic",
    stream_pieces: int = 4,
    preamble: str | None = "Let me look that up.",
    redacted: bool = False,
    api_key: str | None = None,
    require_version: bool = True,
    bind_system: bool = False,
    per_key: bool = False,
) -> tuple[Starlette, MessagesRecorder]:
    """A strict Messages provider app and its recorder.

    ``parallel_calls``: default number of ``tool_use`` blocks per tool answer; ``seed`` seeds the ids and
    signatures (both unique per app either way); ``stream_pieces``: how many deltas each text, thinking and
    input is split into; ``preamble``: the text before the calls (None: calls only); ``redacted``: add a
    ``redacted_thinking`` block after the thinking (``anthropic`` only); ``api_key``: when set, requests must
    carry ``x-api-key: <api_key>`` (else 401 ``authentication_error``); ``require_version``: refuse a request
    without ``anthropic-version`` as Anthropic does; ``bind_system``: signatures are bound to the system
    prompt they were minted under (the AM-14 binding variant); ``per_key``: signatures verify only with the API
    key they were minted for (``x-api-key`` or ``authorization``: another account's are AM-14), ``recorder.state``
    holding those of requests without a key."""
    if parallel_calls < 1:
        raise ValueError("parallel_calls must be >= 1")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    if redacted and profile != "anthropic":
        raise ValueError("only Anthropic sends redacted_thinking blocks")
    recorder = MessagesRecorder(state=ServerState(bind_system=bind_system))
    by_key: dict[str, ServerState] = {}

    def state_for(request: Request) -> ServerState:
        key = request.headers.get("x-api-key") or request.headers.get("authorization")
        if not per_key or key is None:
            return recorder.state
        with lock:
            return by_key.setdefault(key, ServerState(bind_system=bind_system))
    rng = random.Random(seed)
    issued: set[str] = set()
    lock = threading.Lock()

    def fresh(prefix: str, length: int) -> str:
        with lock:
            while True:
                value = prefix + "".join(rng.choices(_ALNUM, k=length))
                if value not in issued:
                    issued.add(value)
                    return value

    def opaque(kind: str) -> str:
        """A signature or redacted payload: base64 like Anthropic's, unique, and the same for the same seed."""
        nonce = fresh(kind, 16)
        return base64.b64encode(b"".join(hashlib.sha512(f"{nonce}:{i}".encode()).digest() for i in range(3))).decode()

    def thinking(text: str) -> list[Block]:
        block: Block = {"type": "thinking", "thinking": text}
        if profile == "anthropic":
            block["signature"] = opaque("sig")
        elif profile == "kimi":
            block["signature"] = ""
        out = [block]
        if redacted:
            out.append({"type": "redacted_thinking", "data": opaque("red")})
        return out

    def script(body: dict[str, Any], n_calls: int) -> tuple[list[Block], str]:
        messages = body["messages"]
        thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") in ("enabled", "adaptive")
        results = _leading_results(messages)
        if results:
            return [{"type": "text", "text": f"Received {results} tool result{'' if results == 1 else 's'}."}], "end_turn"
        new_turn = messages[-1].get("role") == "user"
        tools = body.get("tools")
        names = [tool.get("name", "tool") if isinstance(tool, dict) else "tool" for tool in tools] if isinstance(tools, list) else []
        content: list[Block] = []
        if not (new_turn and names):
            if thinking_on and new_turn:
                content += thinking("A greeting; no tool is needed.")
            return [*content, {"type": "text", "text": HELLO}], "end_turn"
        called = [names[i % len(names)] for i in range(n_calls)]
        if thinking_on:
            content += thinking(f"The user needs data; calling {', '.join(called)} in parallel.")
        if preamble:
            content.append({"type": "text", "text": preamble})
        for i, name in enumerate(called):
            call: Block = {"type": "tool_use", "id": fresh("toolu_", 24), "name": name, "input": {"city": CITIES[i % len(CITIES)], "n": i + 1}}
            if profile == "anthropic":
                call["caller"] = {"type": "direct"}
            content.append(call)
        return content, "tool_use"

    async def record(request: Request) -> tuple[bytes, Any]:
        raw = await request.body()
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            parsed = None
        recorder._add("requests", Received(raw, request.headers, parsed, request.url.path))
        return raw, parsed

    def refuse(request: Request, request_id: str) -> Response | None:
        if api_key is not None and request.headers.get("x-api-key") != api_key:
            return _error(401, _envelope("authentication_error", "invalid x-api-key", request_id), request_id)
        if require_version and "anthropic-version" not in request.headers:
            return _error(400, _envelope("invalid_request_error", "anthropic-version: header is required", request_id), request_id)
        return None

    def rejected(violation: Violation, request_id: str) -> Response:
        body = violation.error_body(request_id)
        recorder._add("rejections", body)
        return _error(violation.status, body, request_id)

    async def messages_endpoint(request: Request) -> Response:
        raw, parsed = await record(request)
        request_id = fresh("req_", 24)
        refused = refuse(request, request_id)
        if refused is not None:
            return refused
        violation = check(raw, profile=profile, state=state_for(request))
        if violation is not None:
            return rejected(violation, request_id)
        n_calls = parallel_calls
        header = request.headers.get(PARALLEL_HEADER)
        if header is not None:
            n_calls = int(header) if header.isdigit() else 0
            if n_calls < 1:
                return _error(400, _envelope("invalid_request_error", f"{PARALLEL_HEADER} must be an integer >= 1, got {header!r}.", request_id), request_id)
        content, stop_reason = script(parsed, n_calls)
        state_for(request).mint(content, parsed.get("system"))
        message = {
            "id": fresh("msg_01", 22),
            "type": "message",
            "role": "assistant",
            "model": parsed["model"] if isinstance(parsed["model"], str) else DEFAULT_MODEL,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": max(1, len(raw) // 4), "output_tokens": max(1, len(orjson.dumps(content)) // 4)},
        }
        recorder._add("responses", copy.deepcopy(message))
        if stop_reason == "tool_use":
            recorder._add("emitted_turns", copy.deepcopy(content))
        if parsed.get("stream") is True:
            return StreamingResponse(
                _sse(sse_events(message, stream_pieces)),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "request-id": request_id},
            )
        return Response(orjson.dumps(message), media_type="application/json", headers={"request-id": request_id})

    async def count_tokens(request: Request) -> Response:
        raw, _ = await record(request)
        request_id = fresh("req_", 24)
        refused = refuse(request, request_id)
        if refused is not None:
            return refused
        violation = check(raw, profile=profile, state=recorder.state, count_tokens=True)
        if violation is not None:
            return rejected(violation, request_id)
        return Response(orjson.dumps({"input_tokens": max(1, len(raw) // 4)}), media_type="application/json", headers={"request-id": request_id})

    async def models(request: Request) -> Response:
        await record(request)
        model = {"type": "model", "id": DEFAULT_MODEL, "display_name": "Claude Strict Test", "created_at": "2025-01-01T00:00:00Z"}
        body = {"data": [model], "has_more": False, "first_id": DEFAULT_MODEL, "last_id": DEFAULT_MODEL}
        return Response(orjson.dumps(body), media_type="application/json")

    async def not_found(request: Request) -> Response:
        await record(request)
        request_id = fresh("req_", 24)
        return _error(404, _envelope("not_found_error", f"Not found: {request.method} {request.url.path}", request_id), request_id)

    app = Starlette(routes=[
        Route("/v1/messages", messages_endpoint, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/{path:path}", not_found, methods=_ALL_METHODS),
    ])
    return app, recorder
