"""Talking to the upstream: which headers go where, one shared HTTP client, and network failures
turned into OpenAI-shaped 502/504 answers."""

from collections.abc import AsyncIterator, Iterable

import httpx

from proxy.errors import error_response

# RFC 9110 section 7.6.1: meaningful for one connection only, never forwarded.
HOP_BY_HOP = frozenset(
    (b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection",
     b"te", b"trailer", b"transfer-encoding", b"upgrade")
)
# Recomputed for the body actually sent.
RECOMPUTED = frozenset((b"host", b"content-length"))

RawHeaders = list[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The upstream could not be reached or did not answer in time."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code

    def response(self):
        return error_response(self.status, self.message, "upstream_error", None, self.code)


class Upstream:
    """The configured upstream base URL and the HTTP client pooled connections to it."""

    def __init__(self, base_url: str, client: httpx.AsyncClient, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client
        self.api_key = api_key

    def url(self, path: str, query: bytes) -> str:
        """The upstream URL for an incoming ``/v1/...`` path: the base already ends with the version."""
        suffix = path[3:] if path.startswith("/v1") else path
        return self.base_url + suffix + ("?" + query.decode("latin-1") if query else "")

    def request_headers(self, incoming: Iterable[tuple[bytes, bytes]], drop: frozenset[bytes] = frozenset()) -> RawHeaders:
        skip = HOP_BY_HOP | RECOMPUTED | drop
        headers = [(name, value) for name, value in incoming if name.lower() not in skip]
        if self.api_key is not None:
            headers = [(n, v) for n, v in headers if n.lower() not in (b"authorization", b"api-key", b"x-api-key")]
            headers.append((b"authorization", b"Bearer " + self.api_key.encode()))
        return headers

    async def send(self, method: str, url: str, headers: RawHeaders, content: bytes | AsyncIterator[bytes] | None) -> httpx.Response:
        request = httpx.Request(method, url, headers=headers, content=content)
        try:
            return await self.client.send(request, stream=True)
        except httpx.TimeoutException:
            raise UpstreamError(504, "The upstream did not answer in time.", "upstream_timeout") from None
        except httpx.HTTPError as exc:
            raise UpstreamError(502, f"The upstream could not be reached ({type(exc).__name__}).", "upstream_unreachable") from None


def response_headers(upstream: httpx.Response) -> RawHeaders:
    return [(name, value) for name, value in upstream.headers.raw if name.lower() not in HOP_BY_HOP]
