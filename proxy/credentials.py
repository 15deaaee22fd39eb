"""Where clients carry their keys: the headers and the query parameter of every supported provider and of the
common API gateways in front of them, and the headers an operator names (``--credential-header``).

The providers' carriers (``HEADERS``, and Gemini's ``?key=``) serve the three decisions that depend on them: whose memory a request uses
(``tenant``), whether the client may use a route (``access``), and which credentials may reach an upstream
(``forward``: a route with the operator's key sends it instead of them). The gateways' carriers (``GATEWAY_HEADERS``)
and the headers an operator names serve the first two (``Carriers``): they scope memory and count as a credential;
they go upstream as sent, the client's own credential for its gateway, never in place of the provider's key.
"""

import hmac
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from urllib.parse import quote_from_bytes, unquote_to_bytes

# OpenAI-style bearer tokens, Azure's api-key, Anthropic's x-api-key, Gemini's x-goog-api-key.
HEADERS = (b"authorization", b"api-key", b"x-api-key", b"x-goog-api-key")
# The gateways': Azure API Management's subscription key, Cloudflare AI Gateway's token, Portkey's key.
GATEWAY_HEADERS = (b"ocp-apim-subscription-key", b"cf-aig-authorization", b"x-portkey-api-key")
# Every built-in carrier, in the order of the tenant formula (proxy/tenant.py): append, never reorder.
CARRIERS = HEADERS + GATEWAY_HEADERS
#: What a header name may be (RFC 9110 5.1: a token).
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Gemini's native API also takes the key in the query string, as ``?key=``.
PARAM = b"key"


def in_headers(headers: Iterable[tuple[bytes, bytes]], names: Collection[bytes] = HEADERS) -> dict[bytes, bytes]:
    """Each credential header the client sent, by lower-case name (of repeated ones, the last)."""
    return {lowered: value for name, value in headers if (lowered := name.lower()) in names}


def operator_header(headers: Iterable[tuple[bytes, bytes]], key: bytes, query: bytes = b"") -> tuple[bytes, bytes] | None:
    """The header that carries the operator's key upstream: in the carrier the client used for its own (an
    Anthropic SDK sends ``x-api-key``, which Anthropic expects; Azure's ``api-key``; Gemini's ``x-goog-api-key``), else
    as a bearer token; None when the client carried its key in the query alone (``?key=``: the operator's goes there,
    ``operator_query``). Only the carrier follows the client; the key and where it goes are the route's."""
    used = in_headers(headers)
    if not used and in_query(query):
        return None
    name = next((carrier for carrier in HEADERS if carrier in used), b"authorization")
    return (name, b"Bearer " + key) if name == b"authorization" else (name, key)


def in_query_alone(headers: Iterable[tuple[bytes, bytes]], query: bytes) -> bool:
    """Whether the client carried its provider key as ``?key=`` and in no provider header."""
    return bool(in_query(query)) and not in_headers(headers)


def operator_query(query: bytes, key: bytes) -> bytes:
    """The query string with the client's ``key`` parameters replaced by one carrying the operator's ``key`` (where
    the client sent one), the rest as sent."""
    if not in_query(query):
        return query
    kept = without_params(query, lambda value: True)
    return (kept + b"&" if kept else b"") + PARAM + b"=" + quote_from_bytes(key, safe="").encode()


def in_query(query: bytes) -> list[bytes]:
    """The raw values of every ``key`` parameter. The name is compared decoded, as a server reads it
    (``k%65y=`` is ``key=`` to Google)."""
    if not query:
        return []
    return [value for name, _, value in (part.partition(b"=") for part in query.split(b"&")) if _is_param(name)]


class Carriers:
    """The headers that carry a client's credential in this deployment: ``CARRIERS``, and those the operator names
    (``--credential-header``; lower-case, in name order, so that the tenant formula does not depend on the order
    they were given in)."""

    def __init__(self, named: Iterable[str] = ()) -> None:
        self.named = tuple(sorted({name.lower().encode() for name in named} - set(CARRIERS)))
        self.names = frozenset(CARRIERS + self.named)

    def present(self, headers: Iterable[tuple[bytes, bytes]], query: bytes) -> bool:
        """Whether the request carries any credential at all (an empty value, or a bare ``Bearer``, is none)."""
        return any(name.lower() in self.names and token(value) for name, value in headers) or any(in_query(query))


#: Every provider's and gateway's carriers, none named by the operator.
BUILT_IN = Carriers()


def header_names(raw: object) -> tuple[str, ...]:
    """Header names from repeated flags or one comma-separated variable; ValueError for one that is not a token."""
    names = [name.strip() for item in (raw if isinstance(raw, (list, tuple)) else [raw]) for name in str(item).split(",")]
    if not all(HEADER_NAME.fullmatch(name) for name in names if name):
        raise ValueError(raw)
    return tuple(name.lower() for name in names if name)


def bearer(value: bytes) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` value; None for any other scheme or none. Any
    whitespace separates, as lenient servers read it."""
    parts = value.split(None, 1)
    if not parts or parts[0].lower() != b"bearer":
        return None
    return parts[1].strip() if len(parts) > 1 else b""


#: Where a client presents one of toolmend's own keys: as a bearer token, or where an Anthropic SDK or a Gemini client
#: puts its key (and, for a Gemini client, as ``?key=``).
CLIENT_KEY_HEADERS = (b"authorization", b"x-api-key", b"x-goog-api-key")


def presented_keys(headers: Iterable[tuple[bytes, bytes]], query: bytes = b"") -> Iterator[bytes]:
    """Every key presented where toolmend's own keys may be: ``Authorization: Bearer <key>`` (OpenAI's clients,
    Claude Code's auth token), ``x-api-key`` (the Anthropic SDKs, Claude Code's API key), ``x-goog-api-key`` and
    ``?key=`` (Gemini's clients; a query value percent-decoded, as a server reads it)."""
    for name, value in headers:
        lowered = name.lower()
        key = bearer(value) if lowered == b"authorization" else value.strip() if lowered in CLIENT_KEY_HEADERS else None
        if key:
            yield key
    for value in in_query(query):
        if value:
            yield unquote_to_bytes(value)


def key_list(text: str) -> frozenset[str]:
    """Keys from an environment variable holding them comma-separated (``TOOLMEND_API_KEYS``, a tenant's)."""
    return frozenset(key.strip() for key in text.split(",") if key.strip())


def token(value: bytes) -> bytes:
    """A header value without its ``Bearer`` scheme: the key it carries."""
    found = bearer(value)
    return found if found is not None else value.strip()


def is_one_of(value: bytes, keys: Collection[bytes]) -> bool:
    """Constant-time membership: how long a refusal takes must not tell a client how close its guess was."""
    return any(hmac.compare_digest(value, key) for key in keys)


def without_params(query: bytes, drop: Callable[[bytes], bool]) -> bytes:
    """The query string without the ``key`` parameters whose raw value ``drop`` selects; the rest as sent."""
    if not in_query(query):
        return query
    kept = []
    for part in query.split(b"&"):
        name, _, value = part.partition(b"=")
        if not (_is_param(name) and drop(value)):
            kept.append(part)
    return b"&".join(kept)


def _is_param(name: bytes) -> bool:
    return name == PARAM or (b"%" in name and unquote_to_bytes(name) == PARAM)
