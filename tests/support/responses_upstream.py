"""A strict, scripted OpenAI Responses provider (``POST /v1/responses``) for end-to-end tests.

``make_responses_upstream()`` returns a Starlette app plus a :class:`ResponsesRecorder`. Every ``POST /v1/responses``
is recorded byte for byte, then validated by :mod:`responses_validator` against what this upstream stored; a
violation is answered with its status (400, or 404 for RS-7/RS-8) and the provider's error body. A valid request
gets the answer of a reasoning model, built from the conversation the server sees (``previous_response_id``
expanded, ``item_reference`` resolved):

* last item a user message and the request has ``function``/``custom`` tools -> a reasoning item, then N parallel
  calls (default 2; header ``x-test-parallel-calls: N`` overrides; header ``x-test-preamble: TEXT`` puts an
  assistant message saying TEXT, phase ``commentary``, between the reasoning and the calls), call ``i`` for ``tools[i % len(tools)]``:
  a ``function_call`` with argument text ``{"city": "Paris", "n": 1}``, ``{"city": "Tokyo", "n": 2}``... (as the
  chat strict upstream), or for a ``custom`` tool a ``custom_tool_call`` with input ``lookup Paris 1``...
* last item an output -> a reasoning item and an assistant message ``"Received K tool outputs."`` (K = the
  trailing outputs);
* anything else -> a reasoning item and ``"Hello from the responses upstream."``.

Ids as OpenAI's: ``resp_``/``rs_``/``fc_``/``ctc_``/``msg_`` + 50 hex digits, call ids ``call_`` + 24 alphanumerics.
Reasoning items carry ``encrypted_content`` (an opaque blob, deterministic for a seed and unique per item) when
``include`` asks for ``reasoning.encrypted_content`` *or* ``store`` is false: the include is what OpenAI documents,
and a stateless client (``store: false``) that forgot it could not replay its reasoning at all, which would only
test the client. Otherwise the key is absent. With ``verify_encrypted`` the upstream verifies it as OpenAI does: a
reasoning or compaction item whose ``encrypted_content`` this upstream did not mint for the request's API key (the
``authorization`` header: another organization or key, or a corrupted blob) is refused (RS-11, 400
``invalid_encrypted_content``).

A response is stored unless ``store`` is false: its items (so later requests may carry their ids or
``item_reference`` them), which reasoning item each one needs (RS-4/RS-5), and its history for
``previous_response_id``; ``GET /v1/responses/{id}`` returns it. Other paths answer 200 with
``{"object": "responses_upstream.passthrough", ...}`` naming the method, path and body size, so pass-through can be
told apart from a Responses answer.

``"stream": true`` answers ``text/event-stream`` with OpenAI's event sequence (``event:`` lines, ``sequence_number``):
``response.created``, ``response.in_progress``, then per item ``response.output_item.added`` (the item
*in progress*: empty arguments / input / content, and for reasoning a different ``encrypted_content``), its deltas
(``function_call_arguments``, ``custom_tool_call_input``, ``content_part`` + ``output_text``; each delta with an
``obfuscation`` field) and ``response.output_item.done``; last ``response.completed`` with the whole response.
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
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.dialects.responses.items import is_call, is_output

from .responses_validator import PROFILES, ServerState, error_for, resolve
from .strict_upstream import _ALL_METHODS, CITIES, DEFAULT_MODEL, PARALLEL_HEADER, Received, Recorder, _error, _split, _tool_name

__all__ = ["PREAMBLE_HEADER", "ResponsesRecorder", "custom_input", "function_arguments", "make_responses_upstream", "parse_sse"]

_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"
_CALLING_TOOLS = ("function", "custom")
#: The header asking for an assistant message between the reasoning and the calls (a preamble), with its text.
PREAMBLE_HEADER = "x-test-preamble"


def function_arguments(i: int) -> str:
    """The argument text of the ``i``-th call of an answer (0-based), as the chat strict upstream's."""
    return json.dumps({"city": CITIES[i % len(CITIES)], "n": i + 1})


def custom_input(i: int) -> str:
    """The input text of the ``i``-th call of an answer when it is a ``custom_tool_call``."""
    return f"lookup {CITIES[i % len(CITIES)]} {i + 1}"


@dataclass
class ResponsesRecorder(Recorder):
    """What the upstream saw, sent and stored (safe to read from the test thread).

    As :class:`~strict_upstream.Recorder`, with every request recorded (any path; ``Received.path`` tells them
    apart), ``emitted_turns`` holding per answer with calls its whole output (reasoning and calls, the ``.done``
    items when streamed), ``responses`` the response objects answered, ``rejections`` the error bodies.
    ``state`` is what the server stored (:class:`~responses_validator.ServerState`); ``stored`` the stored
    response objects by id. :meth:`reset` forgets everything, the stored responses and minted blobs too (an upstream
    that verifies encrypted content goes on verifying it).
    """

    state: ServerState = field(default_factory=ServerState)
    stored: dict[str, dict] = field(default_factory=dict)

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self.state = ServerState(encrypted=None if self.state.encrypted is None else {})
            self.stored.clear()


def _message(item_id: str, text: str) -> dict:
    content = [{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]
    return {"id": item_id, "type": "message", "status": "completed", "content": content, "phase": "final_answer",
            "role": "assistant"}


def _in_progress(item: dict, added_blob: str | None) -> dict:
    """The ``.added`` form of a completed item: nothing generated yet, and a reasoning blob that is not final."""
    item = dict(item)
    kind = item["type"]
    if kind == "reasoning" and "encrypted_content" in item:
        item["encrypted_content"] = added_blob
    elif kind == "function_call":
        item.update(status="in_progress", arguments="")
    elif kind == "custom_tool_call":
        item.update(status="in_progress", input="")
    elif kind == "message":
        item.update(status="in_progress", content=[])
    return item


def _trailing_outputs(conversation: list[dict]) -> int:
    count = 0
    for item in reversed(conversation):
        if not is_output(item):
            break
        count += 1
    return count


def _usage(prompt_bytes: int, output: list[dict]) -> dict:
    prompt = max(1, prompt_bytes // 4)
    completion = max(1, len(orjson.dumps(output)) // 16)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": completion // 2},
            "total_tokens": prompt + completion}


def make_responses_upstream(*, parallel_calls: int = 2, seed: int | None = None, stream_pieces: int = 4,
                            profile: str = "openai", verify_encrypted: bool = False) -> tuple[Starlette, ResponsesRecorder]:
    """A strict Responses provider app and its recorder.

    ``parallel_calls``: default number of parallel calls (header ``x-test-parallel-calls`` overrides). ``seed``:
    seeds ids, blobs and obfuscation (ids stay unique per app either way). ``stream_pieces``: into how many deltas
    each argument / input / text is split when streaming. ``profile``: the validator profile (``openai``,
    ``deepseek``: RS-17, ``kimi``: RS-18); the answers are the same. ``verify_encrypted``: encrypted content is only
    taken back with the API key it was minted for (RS-11).
    """
    if parallel_calls < 1:
        raise ValueError("parallel_calls must be >= 1")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    recorder = ResponsesRecorder(state=ServerState(encrypted={} if verify_encrypted else None))
    rng = random.Random(seed)
    salt = str(seed)
    issued: set[str] = set()
    lock = threading.Lock()  # ids, and validating + storing one request at a time

    def fresh(prefix: str, alphabet: str, length: int) -> str:
        while True:
            value = prefix + "".join(rng.choices(alphabet, k=length))
            if value not in issued:
                issued.add(value)
                return value

    def blob(item_id: str, phase: str) -> str:
        """An opaque Fernet-looking ``encrypted_content``: fixed for a seed, item and phase, unique per item."""
        digest = b"".join(hashlib.sha256(f"{salt}:{item_id}:{phase}:{k}".encode()).digest() for k in range(4))
        return "gAAAAA" + base64.urlsafe_b64encode(digest).decode()

    def script(body: dict, conversation: list[dict], n_calls: int, key: str | None, preamble: str | None = None) -> list[dict]:
        """The output items of the scripted reasoning model (called under ``lock``), its blobs minted for ``key``."""
        reasoning: dict[str, Any] = {"id": fresh("rs_", _HEX, 50), "type": "reasoning"}
        include = body.get("include")
        if body.get("store") is False or (isinstance(include, list) and "reasoning.encrypted_content" in include):
            reasoning["encrypted_content"] = blob(reasoning["id"], "done")
            recorder.state.mint(reasoning["encrypted_content"], key)
        reasoning["summary"] = []
        last = conversation[-1] if conversation else {}
        tools = body.get("tools")
        tools = [t for t in tools if isinstance(t, dict) and t.get("type") in _CALLING_TOOLS] if isinstance(tools, list) else []
        if last.get("role") == "user" and tools:
            calls: list[dict] = []
            for i in range(n_calls):
                tool = tools[i % len(tools)]
                call_id = fresh("call_", _ALNUM, 24)
                if tool["type"] == "custom":
                    calls.append({"id": fresh("ctc_", _HEX, 50), "type": "custom_tool_call", "status": "completed",
                                  "call_id": call_id, "input": custom_input(i), "name": _tool_name(tool)})
                else:
                    calls.append({"id": fresh("fc_", _HEX, 50), "type": "function_call", "status": "completed",
                                  "arguments": function_arguments(i), "call_id": call_id, "name": _tool_name(tool)})
            if preamble is not None:
                return [reasoning, {**_message(fresh("msg_", _HEX, 50), preamble), "phase": "commentary"}, *calls]
            return [reasoning, *calls]
        k = _trailing_outputs(conversation)
        text = f"Received {k} tool output{'' if k == 1 else 's'}." if k else "Hello from the responses upstream."
        return [reasoning, _message(fresh("msg_", _HEX, 50), text)]

    def obfuscation() -> str:
        with lock:
            return "".join(rng.choices(_ALNUM, k=rng.randint(8, 15)))

    def response_object(body: dict, response_id: str, created: int, output: list[dict], usage: dict | None) -> dict:
        done = usage is not None
        tools = body.get("tools")
        model = body.get("model")
        return {
            "id": response_id, "object": "response", "created_at": created,
            "status": "completed" if done else "in_progress", "background": False,
            "completed_at": int(time.time()) if done else None, "error": None, "incomplete_details": None,
            "instructions": body.get("instructions") if isinstance(body.get("instructions"), str) else None,
            "max_output_tokens": body.get("max_output_tokens"), "max_tool_calls": None,
            "model": model if isinstance(model, str) else DEFAULT_MODEL, "output": output,
            "parallel_tool_calls": True, "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": "medium", "summary": None}, "store": body.get("store") is not False,
            "temperature": 1.0, "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto",
            "tools": tools if isinstance(tools, list) else [], "top_p": 0.98, "truncation": "disabled",
            "usage": usage, "user": None, "metadata": {},
        }

    async def responses(request: Request) -> Response:
        raw = await request.body()
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            parsed = None
        recorder._add("requests", Received(raw, request.headers, parsed, request.url.path))
        if parsed is None:
            return _error(400, "We could not parse the JSON body of your request.")
        n_calls = parallel_calls
        header = request.headers.get(PARALLEL_HEADER)
        if header is not None:
            n_calls = int(header) if header.isdigit() else 0
            if n_calls < 1:
                return _error(400, f"{PARALLEL_HEADER} must be an integer >= 1, got {header!r}.")
        key = request.headers.get("authorization")
        with lock:
            rejected = error_for(parsed, recorder.state, profile, key)
            if rejected is None:
                conversation = resolve(parsed, recorder.state)
                output = script(parsed, conversation, n_calls, key, request.headers.get(PREAMBLE_HEADER))
                response_id = fresh("resp_", _HEX, 50)
        if rejected is not None:
            status, error = rejected
            recorder._add("rejections", error)
            return Response(orjson.dumps(error), status_code=status, media_type="application/json")

        created = int(time.time())
        final = response_object(parsed, response_id, created, output, _usage(len(raw), output))
        if parsed.get("store") is not False:
            with lock:
                recorder.state.remember(response_id, copy.deepcopy(conversation), copy.deepcopy(output))
                recorder.stored[response_id] = copy.deepcopy(final)
        if any(is_call(item) for item in output):
            recorder._add("emitted_turns", copy.deepcopy(output))
        recorder._add("responses", copy.deepcopy(final))
        if parsed.get("stream") is True:
            opening = response_object(parsed, response_id, created, [], None)
            return StreamingResponse(_sse(events(opening, final)), media_type="text/event-stream",
                                     headers={"cache-control": "no-cache"})
        return Response(orjson.dumps(final), media_type="application/json")

    def events(opening: dict, final: dict) -> Iterator[dict]:
        """The stream's events in order, without ``sequence_number`` (added as they are sent)."""
        yield {"type": "response.created", "response": opening}
        yield {"type": "response.in_progress", "response": opening}
        for index, item in enumerate(final["output"]):
            item_id = item["id"]
            where = {"item_id": item_id, "output_index": index}
            yield {"type": "response.output_item.added", "item": _in_progress(item, blob(item_id, "added")),
                   "output_index": index}
            if item["type"] == "function_call":
                for piece in _split(item["arguments"], stream_pieces):
                    yield {"type": "response.function_call_arguments.delta", "delta": piece, **where,
                           "obfuscation": obfuscation()}
                yield {"type": "response.function_call_arguments.done", "arguments": item["arguments"], **where}
            elif item["type"] == "custom_tool_call":
                for piece in _split(item["input"], stream_pieces):
                    yield {"type": "response.custom_tool_call_input.delta", "delta": piece, **where,
                           "obfuscation": obfuscation()}
                yield {"type": "response.custom_tool_call_input.done", "input": item["input"], **where}
            elif item["type"] == "message":
                part = item["content"][0]
                text = part["text"]
                at = {"content_index": 0, **where}
                yield {"type": "response.content_part.added", **at, "part": dict(part, text="")}
                for piece in _split(text, stream_pieces):
                    yield {"type": "response.output_text.delta", **at, "delta": piece, "logprobs": [],
                           "obfuscation": obfuscation()}
                yield {"type": "response.output_text.done", **at, "logprobs": [], "text": text}
                yield {"type": "response.content_part.done", **at, "part": part}
            yield {"type": "response.output_item.done", "item": item, "output_index": index}
        yield {"type": "response.completed", "response": final}

    async def retrieve(request: Request) -> Response:
        recorder._add("requests", Received(await request.body(), request.headers, None, request.url.path))
        response_id = request.path_params["response_id"]
        with lock:
            stored = recorder.stored.get(response_id)
        if stored is None:
            return _error(404, f"Response with id '{response_id}' not found.")
        return Response(orjson.dumps(stored), media_type="application/json")

    async def passthrough(request: Request) -> Response:
        raw = await request.body()
        recorder._add("requests", Received(raw, request.headers, None, request.url.path))
        body = {"object": "responses_upstream.passthrough", "method": request.method, "path": request.url.path,
                "query": request.url.query, "body_bytes": len(raw)}
        return Response(orjson.dumps(body), media_type="application/json")

    app = Starlette(routes=[
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/responses/{response_id}", retrieve, methods=["GET"]),
        Route("/{path:path}", passthrough, methods=_ALL_METHODS),
    ])
    return app, recorder


async def _sse(events: Iterator[dict]) -> AsyncIterator[bytes]:
    for number, event in enumerate(events):
        event["sequence_number"] = number
        yield f"event: {event['type']}\n".encode() + b"data: " + orjson.dumps(event) + b"\n\n"
        await asyncio.sleep(0)  # separate writes, so clients see real chunk boundaries


def parse_sse(body: bytes) -> list[dict]:
    """The ``data`` objects of a well-formed event stream, checking each ``event:`` line names its data's type."""
    out = []
    for frame in body.decode().split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        data = json.loads(lines["data"])
        if lines.get("event") != data["type"]:
            raise ValueError(f"event line {lines.get('event')!r} does not match data type {data['type']!r}")
        out.append(data)
    return out
