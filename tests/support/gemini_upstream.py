"""A scripted strict Gemini upstream (the native API) for end-to-end tests.

``make_gemini_upstream()`` returns a Starlette app plus a :class:`GeminiRecorder`. It serves the Developer API's
``/v1beta/models/{model}:generateContent`` and ``:streamGenerateContent`` (and Vertex AI's
``/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:...``), and checks every request against the
rules of the catalogue a history breaks most (exact texts, status 400 ``INVALID_ARGUMENT`` in Google's envelope):

* GN-1: a function-response content answers every call of the call content before it, in one content;
* GN-2: a function-response content comes right after a call content;
* GN-11 (``gemini-3*`` models): the first ``functionCall`` part of each model content of the current turn (since the
  last user text) carries the ``thoughtSignature`` this server minted for it;
* GN-12: every ``thoughtSignature`` is one this server minted (else ``Corrupted thought signature.``).

Valid requests get a deterministic *scripted Gemini* answer: for a new turn (the last content is user text) a thought
part and ``PARALLEL`` parallel ``functionCall`` parts (``get_weather`` with ``{"city": ..., "n": i}``; for a
``gemini-3*`` model the first call part carries a fresh signature, and every call an ``id`` on the Developer API); for a
turn going on with function responses, the text ``"Received K function responses."``, its signature (``gemini-3*``) on
an empty text part in a later chunk. ``:streamGenerateContent?alt=sse`` answers events, without ``alt=sse`` one JSON
array; both are written piece by piece, the array split inside its elements. Every request is recorded.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .strict_upstream import CITIES, Received

__all__ = ["GN1", "GN11_DEVELOPER", "GN12", "GeminiRecorder", "make_gemini_upstream"]

PARALLEL = 2
GN1 = ("Please ensure that the number of function response parts is equal to the number of function call parts of "
       "the function call turn.")
GN2 = "Please ensure that function response turn comes immediately after a function call turn."
GN11_DEVELOPER = ("Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
                  "correctly, and missing thought_signature may lead to degraded model performance. Additional data, "
                  "function call `default_api:{name}` , position {position}. Please refer to "
                  "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")
GN12 = "Corrupted thought signature."


@dataclass
class GeminiRecorder:
    """What the upstream saw and answered. ``requests``: every request (rejected ones too); ``emitted``: the ``model``
    content of every answer, as its parts were sent (streamed ones assembled as a client keeps them);
    ``rejections``: the error bodies answered."""

    requests: list[Received] = field(default_factory=list)
    emitted: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)
    minted: set[bytes] = field(default_factory=set)
    #: When set, a stream's answer waits after its first piece until this event is set (10 s at most; then
    #: ``gave_up_holding``), so a test can tell that the first piece reached the client before the rest was sent.
    hold: threading.Event | None = None
    gave_up_holding: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.emitted.clear()
            self.rejections.clear()

    def add(self, attr: str, item: Any) -> None:
        with self._lock:
            getattr(self, attr).append(item)


def google_error(status: int, message: str) -> Response:
    body = {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}
    return Response(orjson.dumps(body), status, media_type="application/json")


def _calls(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if type(content) is dict else None
    return [part for part in parts or () if type(part) is dict and "functionCall" in part]


def _responses(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if type(content) is dict else None
    return [part for part in parts or () if type(part) is dict and "functionResponse" in part]


def decoded(signature: Any) -> bytes | None:
    """A signature's bytes, as Google reads a ``bytes`` field: base64 in either alphabet (the SDKs send it URL-safe)."""
    if type(signature) is not str:
        return None
    try:
        return base64.b64decode(signature.replace("-", "+").replace("_", "/"), validate=True)
    except ValueError:
        return None


def violation(contents: list[Any], model: str, minted: set[bytes]) -> str | None:
    """The text of the first rule ``contents`` breaks, or None."""
    for index, content in enumerate(contents):
        for part in content.get("parts") or ():
            signature = part.get("thoughtSignature") if type(part) is dict else None
            if signature is not None and decoded(signature) not in minted:
                return GN12
        if _responses(content):
            before = contents[index - 1] if index else None
            if not _calls(before):
                return GN2
            if len(_responses(content)) != len(_calls(before)):
                return GN1
        elif _calls(content) and index + 1 < len(contents) and not _responses(contents[index + 1]):
            return GN1
    if model.startswith("gemini-3"):
        start = max((i for i, content in enumerate(contents) if content.get("role") == "user" and not _responses(content)
                     and content.get("parts")), default=0)
        position = 0
        for content in contents[start:]:
            calls = _calls(content)
            if calls and "thoughtSignature" not in calls[0]:
                return GN11_DEVELOPER.format(name=calls[0]["functionCall"].get("name"), position=position)
            position += len(content.get("parts") or ())
    return None


def make_gemini_upstream(parallel: int = PARALLEL, tool: tuple[str, dict[str, Any]] | None = None) -> tuple[Starlette, GeminiRecorder]:
    """The app and its recorder; ``tool``: the name and arguments of the function every call asks for, when a client
    runs its own tools (Gemini CLI), instead of ``get_weather``."""
    recorder = GeminiRecorder()
    counter = [0]
    calls = [0]

    def signature() -> str:
        counter[0] += 1
        minted = hashlib.sha256(b"scripted-gemini-%d" % counter[0]).digest()
        recorder.minted.add(minted)
        return base64.b64encode(minted).decode()

    def answer(contents: list[Any], model: str, vertex: bool) -> list[dict[str, Any]]:
        """The parts of the model content that answers ``contents``."""
        signed = model.startswith("gemini-3")
        last = contents[-1] if contents else {}
        answered = len(_responses(last))
        if answered:
            parts: list[dict[str, Any]] = [{"text": f"Received {answered} function responses."}]
            if signed:
                parts.append({"text": "", "thoughtSignature": signature()})
            return parts
        parts = [{"text": "Planning the weather lookups.", "thought": True}]
        for i in range(parallel):
            call: dict[str, Any] = ({"name": "get_weather", "args": {"city": CITIES[i % len(CITIES)], "n": i + 1}} if tool is None
                                    else {"name": tool[0], "args": tool[1]})
            calls[0] += 1
            if not vertex:
                call["id"] = f"call-{calls[0]}"
            part: dict[str, Any] = {"functionCall": call}
            if signed and i == 0:
                part["thoughtSignature"] = signature()
            parts.append(part)
        return parts

    def chunk(parts: list[dict[str, Any]], last: bool, model: str) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        out: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": "scripted"}
        if last:
            candidate["finishReason"] = "STOP"
            out["usageMetadata"] = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        return out

    async def generate(request: Request) -> Response:
        raw = await request.body()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        recorder.add("requests", Received(raw, request.headers, body, request.url.path + ("?" + request.url.query if request.url.query else "")))
        model, method = request.path_params["model"], request.url.path.rpartition(":")[2]
        contents = body.get("contents") if type(body) is dict else None
        if type(contents) is not list or not contents:
            return google_error(400, "* GenerateContentRequest.contents: contents is not specified")
        refused = violation(contents, model, recorder.minted)
        if refused is not None:
            recorder.add("rejections", {"message": refused})
            return google_error(400, refused)
        parts = answer(contents, model, "projects" in request.url.path)
        recorder.add("emitted", {"role": "model", "parts": parts})
        if method == "generateContent":
            return Response(orjson.dumps(chunk(parts, True, model)), media_type="application/json")
        # One part per chunk; the last chunk carries the finish reason.
        chunks = [orjson.dumps(chunk([part], i == len(parts) - 1, model)) for i, part in enumerate(parts)]
        if request.query_params.get("alt") == "sse":
            return StreamingResponse(paced([b"data: " + c + b"\r\n\r\n" for c in chunks]), media_type="text/event-stream")
        array = b"[" + b"\n,\r\n".join(chunks) + b"]"
        # Written in pieces that end inside elements, as Google's array stream arrives.
        return StreamingResponse(paced([array[i:i + 37] for i in range(0, len(array), 37)]), media_type="application/json")

    async def paced(pieces: list[bytes]) -> AsyncIterator[bytes]:
        for number, piece in enumerate(pieces):
            yield piece
            if number == 0 and recorder.hold is not None:
                recorder.gave_up_holding = not await asyncio.to_thread(recorder.hold.wait, 10)
            await asyncio.sleep(0)  # each piece its own write

    async def other(request: Request) -> Response:
        """Any other path: recorded, and answered with what was asked."""
        raw = await request.body()
        recorder.add("requests", Received(raw, request.headers, None, request.url.path + ("?" + request.url.query if request.url.query else "")))
        return Response(orjson.dumps({"passed": request.method + " " + request.url.path}), media_type="application/json")

    routes = [Route(version + form + "/models/{model}:" + method, generate, methods=["POST"])
              for version in ("/v1beta", "/v1", "/v1beta1")
              for form in ("", "/projects/{project}/locations/{location}/publishers/google", "/publishers/google")
              for method in ("generateContent", "streamGenerateContent")]
    return Starlette(routes=[*routes, Route("/{path:path}", other, methods=["GET", "POST"])]), recorder
