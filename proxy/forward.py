"""Talking to the upstream: which headers go where, one pooled transport, and network failures turned
into OpenAI-shaped 502/504 answers.

Requests go straight to an httpx transport rather than through ``httpx.AsyncClient``: a proxy wants none
of the client's extras, and one of them is harmful here (a shared cookie jar would carry one tenant's
upstream cookies into another tenant's requests).
"""

import asyncio
import functools
from collections.abc import AsyncIterator, Iterable
from typing import Any
from urllib.parse import unquote_to_bytes

import httpx
from starlette.responses import Response

from proxy import credentials
from proxy.errors import Render, error_response
from proxy.transport import ORIGIN, CertificateError, OutboundProxyError, origin_of

# RFC 9110 section 7.6.1: meaningful for one connection only, never forwarded.
HOP_BY_HOP = frozenset(
    (b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection",
     b"te", b"trailer", b"transfer-encoding", b"upgrade")
)
# Set again for the body actually sent. Expect: the proxy already holds the body, and an interim
# 100 Continue from the upstream would only cost a round trip.
RECOMPUTED = frozenset((b"host", b"content-length", b"expect"))

RawHeaders = list[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The upstream could not be reached, broke off, or did not answer in time."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code

    @classmethod
    def from_httpx(cls, exc: httpx.HTTPError) -> "UpstreamError":
        if isinstance(exc, httpx.TimeoutException):
            return cls(504, "The upstream did not answer in time.", "upstream_timeout")
        if isinstance(exc, OutboundProxyError):
            return cls(502, str(exc), "upstream_proxy_error")
        if isinstance(exc, CertificateError):
            return cls(502, str(exc), "upstream_certificate_error")
        return cls(502, f"The upstream could not be reached or broke off ({type(exc).__name__}).", "upstream_unreachable")

    def response(self, render: Render = error_response) -> Response:
        return render(self.status, self.message, "upstream_error", None, self.code)


def without_hop_by_hop(headers: Iterable[tuple[bytes, bytes]], also: frozenset[bytes] = frozenset()) -> RawHeaders:
    """Drop hop-by-hop headers, including any the ``Connection`` header names (RFC 9110 7.6.1)."""
    headers = list(headers)
    skip = _skipped(headers, also)
    return [(name, value) for name, value in headers if name.lower() not in skip]


def _skipped(headers: RawHeaders, also: frozenset[bytes]) -> frozenset[bytes]:
    """The lower-case names ``without_hop_by_hop`` drops: HOP_BY_HOP, ``also``, and those the ``Connection`` header
    names (most often none beyond HOP_BY_HOP: ``Connection: keep-alive``)."""
    skip = _hop_by_hop_and(also)
    for name, value in headers:
        if name.lower() == b"connection":
            named = {token.strip().lower() for token in value.split(b",")}
            if not named <= skip:
                skip = skip | named
    return skip


@functools.lru_cache(maxsize=16)
def _hop_by_hop_and(also: frozenset[bytes]) -> frozenset[bytes]:
    return HOP_BY_HOP | also


def async_stream(response: httpx.Response) -> httpx.AsyncByteStream:
    """An upstream answer's body stream. httpx types ``Response.stream`` as sync or async; an answer from an
    async transport (all of toolmend's) always has an async one."""
    stream = response.stream
    assert isinstance(stream, httpx.AsyncByteStream), "an async transport answered with a sync body"
    return stream


class _Releasing(httpx.AsyncByteStream):
    """A response body that gives its upstream slot back once it is closed, however it ends."""

    def __init__(self, stream: httpx.AsyncByteStream, slots: asyncio.Semaphore) -> None:
        self.stream, self.slots, self.released = stream, slots, False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.stream.__aiter__()  # no wrapper per chunk: only closing needs this class

    async def aclose(self) -> None:
        try:
            await self.stream.aclose()
        finally:
            if not self.released:
                self.released = True
                self.slots.release()


class Upstream:
    """A configured upstream: its base URL, the pooled transport to it, the proxy's own key if any, and a cap
    on concurrent requests (each holds a slot until its answer is fully relayed)."""

    #: How long a request waits for a slot when the upstream is at its cap, before a 503.
    SLOT_WAIT_SECONDS = 10.0

    def __init__(self, base_url: str, transport: httpx.AsyncBaseTransport, timeout: float, api_key: str | None = None,
                 max_connections: int = 512, client_keys: Iterable[str] = ()) -> None:
        self.base_url = base_url.rstrip("/")
        self.transport = transport
        self.api_key = api_key
        self.max_connections = max_connections
        # Only these parts of the configured URL reach the wire: a client's path cannot change the scheme,
        # host or port, and is always appended below the base path (``https://api.deepseek.com`` has none).
        base = httpx.URL(base_url)
        self._origin = httpx.URL(scheme=base.scheme, host=base.host, port=base.port)
        self._netloc = self._origin.netloc if self._origin.host else None  # every URL ``url`` makes has the origin's
        self._base_path = base.raw_path.partition(b"?")[0].rstrip(b"/")
        # The proxy's own client keys (TOOLMEND_API_KEYS): credentials for toolmend, never for an upstream.
        self._client_keys = frozenset(key.encode() for key in client_keys)
        self._slots = asyncio.Semaphore(max_connections)
        self._extensions = {"timeout": {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout},
                            ORIGIN: origin_of(self._origin)}
        self._urls: dict[tuple[bytes, bytes, bool], httpx.URL] = {}

    def url(self, path: bytes, query: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> httpx.URL:
        """The upstream URL for ``path`` below ``/v1`` as the Router accepted it (still percent-encoded):
        the base URL already ends with the version. Built from parts, never by joining text. A route with the
        operator's key puts it in the query for a client whose ``headers`` carry no key of its own but its ``?key=``."""
        in_query = self.api_key is not None and credentials.in_query_alone(headers, query)
        key = (path, query, in_query)
        url = self._urls.get(key)
        if url is None:
            if in_query and self.api_key is not None:
                query = credentials.operator_query(query, self.api_key.encode())
            else:
                query = credentials.without_params(query, self._not_forwarded)
            url = self._origin.copy_with(raw_path=self._base_path + path + (b"?" + query if query else b""))
            # The chat path and a few others repeat; arbitrary paths do not, and long ones are one-offs
            # that would pin up to --max-header-bytes each.
            if len(self._urls) < 1024 and len(path) + len(query) <= 512:
                self._urls[key] = url
        return url

    def request_headers(self, incoming: Iterable[tuple[bytes, bytes]], drop: frozenset[bytes] = frozenset(),
                        query: bytes = b"") -> RawHeaders:
        """The client's headers for the upstream. A route with the operator's key sends that key (in the carrier the
        client used, ``credentials.operator_header``; in the query, ``url``, for a client that sent ``?key=`` alone)
        instead of every provider credential of the client's; any other route sends the client's own. A gateway's
        credential (``credentials.GATEWAY_HEADERS``) is the client's own for its gateway and goes as sent on either. No
        carrier ever takes one of toolmend's keys upstream."""
        headers = without_hop_by_hop(incoming, RECOMPUTED | drop)
        carrier = None if self.api_key is None else credentials.operator_header(headers, self.api_key.encode(), query)
        if self.api_key is not None or self._client_keys:
            headers = [(name, value) for name, value in headers if not self._withheld(name.lower(), value)]
        if carrier is not None:
            headers.append(carrier)
        return headers

    def _withheld(self, name: bytes, value: bytes) -> bool:
        """Whether a credential header stays behind: a provider's as ``_not_forwarded`` says, a gateway's only
        when it holds a toolmend key (the operator's key replaces the provider's, never the gateway's)."""
        if name in credentials.HEADERS:
            return self._not_forwarded(credentials.token(value))
        return name in credentials.GATEWAY_HEADERS and self._is_client_key(credentials.token(value))

    def _not_forwarded(self, key: bytes) -> bool:
        """Whether a client's provider credential stays behind: all of them where the operator's key goes instead,
        else a toolmend key."""
        return self.api_key is not None or self._is_client_key(key)

    def _is_client_key(self, key: bytes) -> bool:
        """Whether ``key`` is one of toolmend's own, as sent or percent-decoded (a server may decode either)."""
        return any(credentials.is_one_of(form, self._client_keys) for form in (key, unquote_to_bytes(key)))

    async def send(self, method: str, url: httpx.URL, headers: RawHeaders,
                   content: bytes | AsyncIterator[bytes] | None, length: int | None = None) -> httpx.Response:
        """Send and return as soon as the response head arrived; the body is read by the caller.

        A streamed ``content`` of known ``length`` keeps its Content-Length instead of going out chunked.
        """
        if length is not None and not isinstance(content, bytes):
            headers = [*headers, (b"content-length", str(length).encode())]
        if isinstance(content, bytes) or content is None:
            request = in_memory(method, url, headers, content, self._extensions, self._netloc)
        else:
            request = httpx.Request(method, url, headers=headers, content=content, extensions=self._extensions)
        await self._take_slot()
        try:
            response = await self.transport.handle_async_request(request)
        except BaseException as exc:
            self._slots.release()
            if isinstance(exc, httpx.HTTPError):
                raise UpstreamError.from_httpx(exc) from None
            raise
        response.stream = _Releasing(async_stream(response), self._slots)
        return response

    async def _take_slot(self) -> None:
        if not self._slots.locked():
            await self._slots.acquire()  # the usual case: a slot is free, no timer needed
            return
        try:
            async with asyncio.timeout(self.SLOT_WAIT_SECONDS):
                await self._slots.acquire()
        except TimeoutError:
            raise UpstreamError(503, f"toolmend is at its limit of {self.max_connections} concurrent requests to this "
                                     "upstream (--max-upstream-connections); retry shortly.", "upstream_busy") from None


#: The methods httpx gives a ``Content-Length: 0`` when they carry no body.
BODY_METHODS = frozenset(("POST", "PUT", "PATCH"))


def in_memory(method: str, url: httpx.URL, headers: RawHeaders, content: bytes | None, extensions: dict[str, Any],
              netloc: bytes | None = None) -> httpx.Request:
    """``httpx.Request(method, url, headers=headers, content=content, extensions=extensions)`` for a body in memory,
    with the same head (``Host`` first unless given, ``Content-Length: 0`` next for a bodiless POST, PUT or PATCH
    without framing, a body's ``Content-Length`` last unless given) and content, made without httpx's encoding of
    every kind of content: every request to an upstream is made here. ``netloc``: the URL's, when the caller knows it
    (an ``Upstream`` knows its origin's), rather than worked out from ``url`` again."""
    method = method.upper()
    names = {name.lower() for name, _ in headers}
    framed = b"content-length" in names or b"transfer-encoding" in names
    if netloc is None and url.host:
        netloc = url.netloc
    head: RawHeaders = [] if b"host" in names or not netloc else [(b"Host", netloc)]
    if not content:
        if not framed and method in BODY_METHODS:
            head.append((b"Content-Length", b"0"))
        head += headers
    else:
        head += headers
        if b"content-length" not in names:
            head.append((b"Content-Length", b"%d" % len(content)))
    request = httpx.Request(method, url, headers=head, stream=httpx.ByteStream(content or b""), extensions=extensions)
    request.read()  # in memory, so the transport can send it again on a fresh connection
    return request


#: Set by the server that answers the client (uvicorn adds its own Date); as nginx does, the upstream's is not
#: passed on, so that an answer carries exactly one.
SERVER_SET = frozenset((b"date",))
#: Answers that end with their head (RFC 9110 6.4.1). A Content-Length on one (a 304 may carry its
#: representation's, a sloppy server puts one on a 204) would make uvicorn wait for body bytes that never come:
#: it raises and drops the client's keep-alive connection. The client needs none to read these answers.
BODILESS_STATUSES = frozenset((204, 304))
BODILESS_SKIP = SERVER_SET | {b"content-length"}
#: toolmend's own answer headers (``x-toolmend-repairs``, ``-calls``, ``-memory``, ``-request-id``): only toolmend sets
#: them, so one from an upstream would pass for toolmend's word and is never relayed.
OWN_HEADERS = b"x-toolmend-"


def response_headers(upstream: httpx.Response) -> RawHeaders:
    """The upstream answer's headers that go on to the client: without hop-by-hop ones, the server's own, or toolmend's."""
    headers = upstream.headers.raw
    skip = _skipped(headers, BODILESS_SKIP if upstream.status_code in BODILESS_STATUSES else SERVER_SET)
    return [(name, value) for name, value in headers if (lowered := name.lower()) not in skip and not lowered.startswith(OWN_HEADERS)]


def header_value(headers: RawHeaders, name: bytes) -> bytes | None:
    """The value of the header ``name`` (lower case) as ``httpx.Headers.get`` reads it, undecoded: every occurrence
    joined by ``, ``; None when there is none."""
    values = [value for key, value in headers if key.lower() == name]
    return b", ".join(values) if values else None


def is_event_stream(headers: RawHeaders) -> bool:
    """Whether the content type is an event stream, as ``header_value`` would read it: the occurrences joined start as
    the first does, so the first decides (and no later one is looked at)."""
    for key, value in headers:
        if key.lower() == b"content-type":
            return value.startswith(b"text/event-stream")
    return False
