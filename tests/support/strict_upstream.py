"""A strict OpenAI-compatible provider for end-to-end tests, and a helper to serve any ASGI app.

``make_strict_upstream()`` returns a Starlette app plus a :class:`Recorder`.  The app rejects every request
that breaks the strict profile (:mod:`strict_validator`, rules of ``docs/provider-rules.md``) with
HTTP 400 and the OpenAI error body, exactly like a strict provider.  Valid requests get a deterministic
*scripted agent* answer:

* last message ``user`` and the request has ``tools`` -> N parallel tool calls (default 2; request header
  ``x-test-parallel-calls: N`` overrides), call ``i`` targets ``tools[i % len(tools)]``, fresh ids
  ``call_`` + 24 alphanumerics, argument texts ``{"city": "Paris", "n": 1}``, ``{"city": "Tokyo", "n": 2}``...
  (``json.dumps`` spacing, so tests can check the exact text came back), ``finish_reason: "tool_calls"``.
* last message ``tool`` -> text ``"Received K tool results."`` (K = size of the trailing tool block),
  ``finish_reason: "stop"``.
* anything else -> text ``"Hello from the strict upstream."``.

``"stream": true`` answers ``text/event-stream`` with OpenAI-shaped ``chat.completion.chunk`` events.

``provider=`` plays one strict provider (:mod:`provider_validators`): its rules and error shape, and answers
that look like its own.  ``"openai"`` (default) is unchanged: the full merged strict profile minus
``skip_rules``, OpenAI error bodies, ``call_`` + 24 ids, ``refusal``/``annotations`` keys.  Other providers
validate with ``provider_violations(body, provider, skip_rules)`` and answer without ``refusal`` /
``annotations`` (so an answer replayed verbatim is valid for the same provider), and:

* ``mistral``: call ids of 9 alphanumerics (MI-4); errors in Mistral's shape (MI-7 as HTTP 422).
* ``deepseek``: every answer carries ``reasoning_content`` (JSON; streamed as ``delta.reasoning_content``
  pieces before the content / tool calls).  DS-3 is enforced on requests in thinking mode only (model name
  with ``reasoner``/``thinking``, or ``thinking: {type: enabled}``).
* ``gemini``: each emitted call carries ``extra_content: {"google": {"thought_signature": <base64>}}`` (JSON,
  and in the first streamed delta of the call); the upstream then rejects a replay of an emitted call id
  without the identical ``extra_content`` (GE-4).
* ``openrouter``: to a Gemini 3 model (``google/gemini-3*``), a tool-call answer carries ``reasoning`` and
  ``reasoning_details`` (a ``reasoning.text`` entry, then a ``reasoning.encrypted`` one holding the signature;
  streamed as ``delta.reasoning_details``: the text in pieces, the signature with the first call); the upstream
  then rejects a current-turn replay of those calls without the signature (GE-8).  Other models: OpenAI's answers.
* tool-call answers have ``content: ""`` for gemini, ollama, xai (they reject null: GE-6, OL-1, XA-1),
  deepseek and mistral (what those APIs send); ``null`` for the others.

``serve(app)`` runs any ASGI app under a real uvicorn server in a background thread.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import random
import socket
import string
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .provider_validators import PROVIDERS, gemini_3, provider_error
from .strict_validator import first_error

__all__ = ["Received", "Recorder", "make_strict_upstream", "serve", "CITIES", "DEFAULT_MODEL"]

DEFAULT_MODEL = "gpt-strict-test"
CITIES = ("Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Quito", "Hanoi", "Accra")
PARALLEL_HEADER = "x-test-parallel-calls"
_ALNUM = string.ascii_letters + string.digits
_FINGERPRINT = "fp_strict0001"
_ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# Providers whose tool-only assistant content is "" (they reject null: GE-6, OL-1, XA-1; DeepSeek sends "").
_EMPTY_STRING_CONTENT = frozenset({"gemini", "ollama", "xai", "deepseek", "mistral"})


#: The rules the OpenAI upstream of the tests leaves out. A leading orphan repaired by synthesis opens the history
#: with a call turn: OpenAI accepts that; only Gemini's GE-3 (S12) does not, and that is the gemini profile's business.
OPENAI_SKIPS = ("S12",)


@dataclass(frozen=True)
class Received:
    """One request as the upstream received it: raw bytes, headers (case-insensitive), parsed JSON (or None)."""

    body_bytes: bytes
    headers: Headers
    json: Any
    path: str = "/v1/chat/completions"


@dataclass
class Recorder:
    """What the upstream saw and sent.  Safe to read from the test thread while the server runs.

    ``requests``: every ``POST /v1/chat/completions`` received (also the rejected ones).
    ``emitted_turns``: per tool-call answer, the list of tool-call dicts exactly as sent (non-streaming) or
    as the streamed deltas assemble to.  ``emitted_calls``: the same, flattened.
    ``rejections``: the error bodies answered with HTTP 400.
    ``responses``: the assistant ``message`` dicts answered (tool-call and text answers, both modes).
    """

    requests: list[Received] = field(default_factory=list)
    emitted_turns: list[list[dict]] = field(default_factory=list)
    rejections: list[dict] = field(default_factory=list)
    responses: list[dict] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def emitted_calls(self) -> list[dict]:
        with self._lock:
            return [call for turn in self.emitted_turns for call in turn]

    @property
    def last(self) -> Received:
        with self._lock:
            return self.requests[-1]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.emitted_turns.clear()
            self.rejections.clear()
            self.responses.clear()

    def _add(self, attr: str, item: Any) -> None:
        with self._lock:
            getattr(self, attr).append(item)


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None,
           type_: str = "invalid_request_error") -> Response:
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _trailing_tool_results(messages: list[dict]) -> int:
    count = 0
    for msg in reversed(messages):
        if msg.get("role") != "tool":
            break
        count += 1
    return count


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return function["name"]
        if isinstance(tool.get("name"), str):
            return tool["name"]
    return "tool"


def _usage(prompt_bytes: int, completion_text: str) -> dict:
    prompt = max(1, prompt_bytes // 4)
    completion = max(1, len(completion_text) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _split(text: str, pieces: int) -> list[str]:
    """Split ``text`` into at most ``pieces`` non-empty parts (at least one part, possibly "")."""
    if len(text) <= 1:
        return [text]
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def make_strict_upstream(
    *,
    parallel_calls: int = 2,
    seed: int | None = None,
    api_key: str | None = None,
    stream_pieces: int = 4,
    skip_rules: tuple[str, ...] = (),
    provider: str = "openai",
) -> tuple[Starlette, Recorder]:
    """A strict provider app and its recorder.

    ``parallel_calls``: default number of parallel calls (header ``x-test-parallel-calls`` overrides).
    ``seed``: seeds the id generator (ids stay unique per app either way).
    ``api_key``: when set, requests must carry ``Authorization: Bearer <api_key>`` (else OpenAI's 401).
    ``stream_pieces``: how many chunks each argument string / text answer is split into when streaming.
    ``skip_rules``: validator rule ids this provider does not enforce (e.g. ``("S12",)``).
    ``provider``: which strict provider to play (see the module docstring); ``"openai"`` keeps the merged
    strict profile (pass ``skip_rules=("S12", "VL-2")`` for exactly ``provider_violations(..., "openai")``).
    """
    if parallel_calls < 1:
        raise ValueError("parallel_calls must be >= 1")
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; choose one of: {', '.join(PROVIDERS)}")
    recorder = Recorder()
    rng = random.Random(seed)
    issued: set[str] = set()
    id_lock = threading.Lock()
    signatures: dict[str, Any] = {}  # gemini: call id -> extra_content as emitted (GE-4); openrouter: reasoning_details (GE-8)

    def fresh(prefix: str, length: int) -> str:
        with id_lock:
            while True:
                value = prefix + "".join(rng.choices(_ALNUM, k=length))
                if value not in issued:
                    issued.add(value)
                    return value

    def check_auth(request: Request) -> Response | None:
        if api_key is None:
            return None
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer "):
            return _error(401, "You didn't provide an API key. You need to provide your API key in an "
                          "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
        if auth[len("Bearer "):] != api_key:
            return _error(401, "Incorrect API key provided. You can find your API key at "
                          "https://platform.openai.com/account/api-keys.", code="invalid_api_key")
        return None

    def call_id() -> str:
        return fresh("", 9) if provider == "mistral" else fresh("call_", 24)

    def signature() -> dict:
        with id_lock:
            raw = bytes(rng.getrandbits(8) for _ in range(48))
        return {"google": {"thought_signature": base64.b64encode(raw).decode()}}

    def script(body: dict, n_calls: int) -> dict:
        """The scripted agent's assistant message for a valid request."""
        messages = body["messages"]
        last = messages[-1]
        tools = body.get("tools")
        extras = {"refusal": None, "annotations": []} if provider == "openai" else {}
        if last.get("role") == "user" and isinstance(tools, list) and tools:
            calls = []
            for i in range(n_calls):
                arguments = json.dumps({"city": CITIES[i % len(CITIES)], "n": i + 1})
                call = {
                    "id": call_id(),
                    "type": "function",
                    "function": {"name": _tool_name(tools[i % len(tools)]), "arguments": arguments},
                }
                if provider == "gemini":
                    call["extra_content"] = signature()
                    with id_lock:
                        signatures[call["id"]] = copy.deepcopy(call["extra_content"])
                calls.append(call)
            content = "" if provider in _EMPTY_STRING_CONTENT else None
            message = {"role": "assistant", "content": content, "tool_calls": calls, **extras}
            if provider == "openrouter" and gemini_3(body.get("model")):
                thought = f"The user needs data; calling {len(calls)} tools."
                data = signature()["google"]["thought_signature"]
                message["reasoning"] = thought
                message["reasoning_details"] = [
                    {"type": "reasoning.text", "text": thought, "format": "google-gemini-v1", "index": 0},
                    {"type": "reasoning.encrypted", "data": data, "id": "tool_" + calls[0]["id"],
                     "format": "google-gemini-v1", "index": 0}]
                with id_lock:
                    signatures.update((c["id"], copy.deepcopy(message["reasoning_details"])) for c in calls)
            if provider == "deepseek":
                names = ", ".join(c["function"]["name"] for c in calls)
                message["reasoning_content"] = f"The user needs data; calling {names}."
            return message
        if last.get("role") == "tool":
            k = _trailing_tool_results(messages)
            text = f"Received {k} tool result{'' if k == 1 else 's'}."
        else:
            text = "Hello from the strict upstream."
        message = {"role": "assistant", "content": text, **extras}
        if provider == "deepseek":
            message["reasoning_content"] = "Nothing to call; answering directly."
        return message

    def validate(parsed: Any) -> tuple[int, Any] | None:
        if provider == "openai":
            error = first_error(parsed, skip_rules)
            return None if error is None else (400, error)
        with id_lock:
            emitted = dict(signatures)
        return provider_error(parsed, provider, skip_rules, emitted_signatures=emitted or None)

    async def chat_completions(request: Request) -> Response:
        raw = await request.body()
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            parsed = None
        recorder._add("requests", Received(raw, request.headers, parsed, request.url.path))
        denied = check_auth(request)
        if denied is not None:
            return denied
        if parsed is None:
            return _error(400, "We could not parse the JSON body of your request. (HINT: This likely means you "
                          "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but "
                          "what was sent was not valid JSON. If you have trouble figuring out how to fix this, "
                          "please contact us through our help center at help.openai.com.)")
        rejected = validate(parsed)
        if rejected is not None:
            status, error = rejected
            recorder._add("rejections", error)
            return Response(orjson.dumps(error), status_code=status, media_type="application/json")

        n_calls = parallel_calls
        header = request.headers.get(PARALLEL_HEADER)
        if header is not None:
            try:
                n_calls = int(header)
            except ValueError:
                n_calls = 0
            if n_calls < 1:
                return _error(400, f"{PARALLEL_HEADER} must be an integer >= 1, got {header!r}.")

        message = script(parsed, n_calls)
        if message.get("tool_calls"):
            recorder._add("emitted_turns", copy.deepcopy(message["tool_calls"]))
        recorder._add("responses", message)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        model = parsed.get("model") if isinstance(parsed.get("model"), str) else DEFAULT_MODEL
        completion_id = fresh("chatcmpl-", 29)
        created = int(time.time())
        completion_text = orjson.dumps(message.get("tool_calls") or message["content"]).decode()
        usage = _usage(len(raw), completion_text)

        if parsed.get("stream") is True:
            stream_options = parsed.get("stream_options")
            include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage") is True
            chunks = _stream_chunks(message, finish, stream_pieces, openai=provider == "openai")
            return StreamingResponse(
                _sse(chunks, completion_id, created, model, usage if include_usage else None),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )

        body = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": usage,
            "service_tier": "default",
            "system_fingerprint": _FINGERPRINT,
        }
        return Response(orjson.dumps(body), media_type="application/json")

    async def models(request: Request) -> Response:
        denied = check_auth(request)
        if denied is not None:
            return denied
        data = [
            {"id": name, "object": "model", "created": 1700000000, "owned_by": "strict-upstream"}
            for name in (DEFAULT_MODEL, "gpt-strict-test-mini")
        ]
        return Response(orjson.dumps({"object": "list", "data": data}), media_type="application/json")

    async def not_found(request: Request) -> Response:
        return _error(404, f"Invalid URL ({request.method} {request.url.path})")

    app = Starlette(routes=[
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/{path:path}", not_found, methods=_ALL_METHODS),
    ])
    return app, recorder


def _stream_chunks(message: dict, finish: str, pieces: int, openai: bool = True) -> list[tuple[dict, str | None]]:
    """The (delta, finish_reason) sequence OpenAI streams for ``message``.

    Role first; then ``reasoning_content`` pieces when the message has reasoning (DeepSeek), or ``reasoning`` with
    the ``reasoning.text`` entry of ``reasoning_details`` in pieces (OpenRouter); for tool calls, each call's first
    delta carries ``index``, ``id``, ``type``, ``function.name`` (with ``arguments: ""``) and ``extra_content`` when
    the call has one (Gemini), the first also the other ``reasoning_details`` entries (OpenRouter's signature), then
    its argument text in several pieces; then the empty delta with the finish reason.  ``openai=False`` leaves
    ``refusal`` out of the role delta.
    """
    calls = message.get("tool_calls")
    out: list[tuple[dict, str | None]] = []
    refusal = {"refusal": None} if openai else {}
    if calls:
        out.append(({"role": "assistant", "content": None if openai else message["content"], **refusal}, None))
    else:
        out.append(({"role": "assistant", "content": "", **refusal}, None))
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        out.extend(({"reasoning_content": piece}, None) for piece in _split(reasoning, pieces))
    details = message.get("reasoning_details", [])
    for entry in details[:1]:
        out.extend(({"reasoning": piece, "reasoning_details": [{**entry, "text": piece}]}, None)
                   for piece in _split(entry["text"], pieces))
    if calls:
        for i, call in enumerate(calls):
            first = {"index": i, "id": call["id"], "type": "function",
                     "function": {"name": call["function"]["name"], "arguments": ""}}
            if "extra_content" in call:
                first["extra_content"] = call["extra_content"]
            if i == 0 and details[1:]:
                out.append(({"tool_calls": [first], "reasoning_details": details[1:]}, None))
                first = {}
            if first:
                out.append(({"tool_calls": [first]}, None))
            for piece in _split(call["function"]["arguments"], pieces):
                out.append(({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}, None))
    else:
        for piece in _split(message["content"], pieces):
            out.append(({"content": piece}, None))
    out.append(({}, finish))
    return out


async def _sse(chunks, completion_id: str, created: int, model: str, usage: dict | None):
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "service_tier": "default", "system_fingerprint": _FINGERPRINT}
    for delta, finish in chunks:
        event = dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])
        if usage is not None:
            event["usage"] = None
        yield b"data: " + orjson.dumps(event) + b"\n\n"
        await asyncio.sleep(0)  # separate writes, so clients see real chunk boundaries
    if usage is not None:
        yield b"data: " + orjson.dumps(dict(base, choices=[], usage=usage)) + b"\n\n"
    yield b"data: [DONE]\n\n"


@contextlib.contextmanager
def serve(app: Any, *, host: str = "127.0.0.1", startup_timeout: float = 10.0,
          log_level: str = "warning", **config: Any) -> Iterator[str]:
    """Run the ASGI ``app`` under uvicorn in a background thread; yields ``http://host:port`` (no path).

    The socket is bound (port 0) before the server starts, so the port is free and known up front; the
    helper returns once the server accepts connections, and on exit asks uvicorn to shut down gracefully
    (forcing it after a few seconds).  Extra keyword arguments go to ``uvicorn.Config``.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config.setdefault("timeout_graceful_shutdown", 3)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, **config))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread (incl. SystemExit)
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise RuntimeError(f"uvicorn did not start on {host}:{port}: {failure or 'timeout'}")
            time.sleep(0.01)
        with socket.create_connection((host, port), timeout=startup_timeout):
            pass
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=5)
        sock.close()
