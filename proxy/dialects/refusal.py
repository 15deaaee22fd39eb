"""What an upstream's refusal says, read once for every rule that answers one with a retry (AM-14, RS-11, RS-8), and
what such a rule leaves out of the request it sends again.

``read`` finds every message and code of an error body, in each shape it reaches a client in: OpenAI's and
Anthropic's ``{"error": {"message": ..., "code": ...}}`` (Anthropic's inside ``{"type": "error", ...}``),
OpenRouter's wrapper with the provider's own body as a string in ``error.metadata.raw`` (read as one more body,
once), and Bedrock's ``ValidationException`` (``{"message": ...}``, the type in the ``x-amzn-errortype`` header or
``__type``). ``FirstEvent`` reads the same from the first event of a stream of status 200: Anthropic's ``event:
error``, the Responses API's ``error`` event (its message and code on the event itself), or a Responses
``response.failed`` whose ``response.error`` is the error. ``Refusal.says`` matches a
wording however it is prefixed (``The model returned the following errors:``, ``Validation error:``) or quoted
(backticks or none).

A retried request leaves out the signed thinking or encrypted reasoning the refusal was about: ``Leaving`` says
which (every one, or those whose ``digest`` is in a set), and a ``Refusing`` context carries it to the rules.
"""

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.dialects.sse import EventStreamReader
from proxy.repair.context import Context

#: The status of a refusal of a request's content; a refusal that arrives as a stream's first event counts as one.
STATUS = 400
#: The type Bedrock names its refusals of a request with (``x-amzn-errortype``, or ``__type`` in the body).
BEDROCK_TYPE = "ValidationException"
#: The type of a Responses stream's event that ended the response with an error.
FAILED = "response.failed"
#: Longest error message kept: a refusal's text fits many times over, a quoted body does not slow the matching.
MAX_MESSAGE = 4096


@dataclass(frozen=True, slots=True)
class Refusal:
    """An upstream's refusal: its status and every error message and code found in its body."""

    status: int
    messages: tuple[str, ...]
    codes: tuple[str, ...] = ()

    def says(self, *phrases: str) -> bool:
        """Whether one message holds every phrase (given in lower case, without backticks), compared without case and
        backticks: ``Invalid `signature` in `thinking` block`` and ``Invalid signature in thinking block`` alike."""
        return any(all(phrase in text for phrase in phrases) for text in self._texts())

    def _texts(self) -> Iterable[str]:
        return (message.replace("`", "").lower() for message in self.messages)


def read(status: int, error: bytes, headers: Mapping[str, str] | None = None) -> Refusal | None:
    """The refusal an answer's body is, with the answer's ``status``; None when the body is no JSON error in a shape
    above. ``headers``: the answer's, for Bedrock's error type."""
    bedrock = headers is not None and BEDROCK_TYPE in headers.get("x-amzn-errortype", "")
    return _refusal(status, _loads(error), bedrock)


def _refusal(status: int, parsed: Any, bedrock: bool) -> Refusal | None:
    if type(parsed) is not dict:
        return None
    messages: list[str] = []
    codes: list[str] = []
    _collect(parsed, messages, codes, bedrock, nested=True)
    return Refusal(status, tuple(messages), tuple(codes)) if messages or codes else None


class FirstEvent(EventStreamReader):
    """Reads a stream up to its first complete event, comment or blank line, and nothing after it: ``finished`` once
    that is read, ``refusal`` what it says when it is an event that is a refusal (an ``error`` event, its message and
    code in its ``error`` object, Anthropic's, or on the event itself, the Responses API's; a Responses
    ``response.failed``: counted as of status 400). Anything else (a keep-alive comment, an event that is no JSON)
    ends the reading too: no client waits for more than the stream's first thing."""

    __slots__ = ("refusal",)

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self.refusal: Refusal | None = None

    def read(self, chunk: bytes) -> bool:
        """Feed one chunk; whether the first event is read (or the stream passed ``max_bytes``)."""
        self.feed(chunk)
        return self._done or self.abandoned

    def _dispatch(self, data: list[bytes]) -> None:
        if not self._done:
            super()._dispatch(data)  # a large event is held, and read by ``feed`` before it returns
            self._done = True

    def _kept_alive(self) -> None:
        self._done = True

    def _apply(self, obj: Any) -> None:
        kind = obj.get("type") if type(obj) is dict else None
        if kind == "error":
            self.refusal = _refusal(STATUS, obj if type(obj.get("error")) is dict else {"error": obj}, bedrock=False)
        elif kind == FAILED and type(response := obj.get("response")) is dict and type(failed := response.get("error")) is dict:
            self.refusal = _refusal(STATUS, {"error": failed}, bedrock=False)


def _loads(body: bytes | str) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _collect(parsed: dict[str, Any], messages: list[str], codes: list[str], bedrock: bool, nested: bool) -> None:
    """Append the body's messages and codes: its ``error`` object's, the provider body OpenRouter quotes in
    ``error.metadata.raw`` (read when ``nested``: once), and Bedrock's top-level message."""
    detail = parsed.get("error")
    if type(detail) is dict:
        _add(messages, detail.get("message"))
        _add(codes, detail.get("code"))
        metadata = detail.get("metadata")
        raw = metadata.get("raw") if type(metadata) is dict else None
        if nested and type(raw) is str:
            quoted = _loads(raw)
            if type(quoted) is dict:
                _collect(quoted, messages, codes, bedrock, nested=False)
            else:
                _add(messages, raw)
    if bedrock or BEDROCK_TYPE in str(parsed.get("__type", "")):
        _add(messages, parsed.get("message", parsed.get("Message")))


def _add(found: list[str], value: Any) -> None:
    if type(value) is str and value:
        found.append(value[:MAX_MESSAGE])


def digest(blob: str) -> str:
    """What a signature or an encrypted blob is remembered by: never the blob itself."""
    return hashlib.blake2b(blob.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Leaving:
    """What a request sent again leaves out: of its signed thinking or encrypted reasoning, every one (``digests``
    None) or those whose ``digest`` is in ``digests``; ``remembered`` when the upstream refused them before (not this
    request); ``refusal``, the refusal it answers, for a rule that reads what it names."""

    digests: frozenset[str] | None = None
    remembered: bool = False
    refusal: Refusal | None = None

    def leaves(self, blob: Any) -> bool:
        """Whether a block or item whose signature or blob is ``blob`` (None: it carries none) is left out."""
        return self.digests is None or (type(blob) is str and digest(blob) in self.digests)


#: What the retry after a refusal leaves out when memory knows nothing: every one.
EVERY = Leaving()


class Refusing(Context):
    """A repair context for a refused request, which knows what it leaves out (``leaving``)."""

    leaving: Leaving = EVERY


def leaving(ctx: Context) -> Leaving:
    return ctx.leaving if isinstance(ctx, Refusing) else EVERY


def chosen(refusal: Refusal, blobs: Iterable[Any], minted: frozenset[str]) -> Leaving:
    """What the retry after a refusal leaves out, of a request carrying ``blobs``: those memory did not capture for
    this tenant (``minted``: their digests), so that what was minted for the credential in use stays; every one when
    memory captured all of them or none (the refusal then was not about the credential, or memory cannot tell)."""
    foreign = frozenset(digest(blob) for blob in blobs if type(blob) is str and digest(blob) not in minted)
    return Leaving(foreign if minted and foreign else None, refusal=refusal)
