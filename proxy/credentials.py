"""Where clients carry their keys: the headers and the query parameter of every supported provider.

One list serves the three decisions that depend on it: whose memory a request uses (``tenant``), whether
the client may use a route (``access``), and which credentials may reach an upstream (``forward``).
"""

import hmac
from collections.abc import Callable, Collection, Iterable
from urllib.parse import unquote_to_bytes

# OpenAI-style bearer tokens, Azure's api-key, Anthropic's x-api-key, Gemini's x-goog-api-key. The order is
# part of the tenant formula (proxy/tenant.py): append, never reorder.
HEADERS = (b"authorization", b"api-key", b"x-api-key", b"x-goog-api-key")
# Gemini's native API also takes the key in the query string, as ``?key=``.
PARAM = b"key"


def in_headers(headers: Iterable[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """Each credential header the client sent, by lower-case name (of repeated ones, the last)."""
    return {lowered: value for name, value in headers if (lowered := name.lower()) in HEADERS}


def in_query(query: bytes) -> list[bytes]:
    """The raw values of every ``key`` parameter. The name is compared decoded, as a server reads it
    (``k%65y=`` is ``key=`` to Google)."""
    return [value for name, value in _params(query) if _is_param(name)]


def present(headers: Iterable[tuple[bytes, bytes]], query: bytes) -> bool:
    """Whether the request carries any credential at all (an empty value is none)."""
    return any(in_headers(headers).values()) or any(in_query(query))


def token(value: bytes) -> bytes:
    """A header value without its ``Bearer`` scheme: the key it carries."""
    value = value.strip()
    return value[7:].strip() if value[:7].lower() == b"bearer " else value


def is_one_of(value: bytes, keys: Collection[bytes]) -> bool:
    """Constant-time membership: how long a refusal takes must not tell a client how close its guess was."""
    return any(hmac.compare_digest(value, key) for key in keys)


def without_params(query: bytes, drop: Callable[[bytes], bool]) -> bytes:
    """The query string without the ``key`` parameters whose raw value ``drop`` selects; the rest as sent."""
    if not in_query(query):
        return query
    return b"&".join(part for part, (name, value) in zip(query.split(b"&"), _params(query))
                     if not (_is_param(name) and drop(value)))


def _params(query: bytes) -> Iterable[tuple[bytes, bytes]]:
    if not query:
        return
    for part in query.split(b"&"):
        name, _, value = part.partition(b"=")
        yield name, value


def _is_param(name: bytes) -> bool:
    return name == PARAM or (b"%" in name and unquote_to_bytes(name) == PARAM)
