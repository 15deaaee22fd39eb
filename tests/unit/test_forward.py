"""``forward.in_memory``: the request httpx would make of a body in memory, head and content alike."""

import httpx
import pytest

from proxy.forward import header_value, in_memory, is_event_stream, response_headers

URL = httpx.URL("https://api.example.test:8443/v1/chat/completions?x=1")
TIMEOUTS = {"timeout": {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}}
HEADERS = [(b"Authorization", b"Bearer sk-a"), (b"content-type", b"application/json"), (b"X-Trace", b"1")]


@pytest.mark.parametrize("method", ["POST", "post", "PUT", "PATCH", "GET", "DELETE"])
@pytest.mark.parametrize("content", [b'{"model": "m"}', b"", None])
@pytest.mark.parametrize("extra", [
    [],
    [(b"Host", b"elsewhere.test")],
    [(b"Content-Length", b"14")],
    [(b"Transfer-Encoding", b"chunked")],
    [(b"host", b"a.test"), (b"content-length", b"0")],
])
def test_a_request_in_memory_is_the_one_httpx_makes(method, content, extra):
    headers = [*HEADERS, *extra]
    ours = in_memory(method, URL, headers, content, TIMEOUTS)
    theirs = httpx.Request(method, URL, headers=headers, content=content, extensions=TIMEOUTS)
    assert (ours.method, ours.url, ours.headers.raw, ours.content, ours.extensions) == \
        (theirs.method, theirs.url, theirs.headers.raw, theirs.content, theirs.extensions)
    assert headers == [*HEADERS, *extra]  # the caller's list is left as it was


def test_a_url_without_a_host_gets_no_host_header():
    url = httpx.URL("/v1/models")
    assert in_memory("GET", url, [], None, {}).headers.raw == httpx.Request("GET", url).headers.raw


@pytest.mark.parametrize("name", ["content-type", "content-encoding", "x-missing"])
def test_a_header_value_is_what_httpx_headers_get_reads(name):
    raw = [(b"Content-Type", b"text/event-stream"), (b"Content-Encoding", b"gzip"), (b"content-encoding", b"br"),
           (b"Connection", b"keep-alive, X-Hop"), (b"X-Hop", b"1"), (b"X-Toolmend-Repairs", b"TM101=1"), (b"Date", b"now")]
    answer = httpx.Response(200, headers=raw)
    expected = answer.headers.get(name)
    assert header_value(response_headers(answer), name.encode()) == (None if expected is None else expected.encode())
    assert response_headers(answer) == [(b"Content-Type", b"text/event-stream"), (b"Content-Encoding", b"gzip"),
                                        (b"content-encoding", b"br")]


@pytest.mark.parametrize("raw", [
    [(b"Content-Type", b"text/event-stream; charset=utf-8")],
    [(b"content-type", b"text/event-stream"), (b"Content-Type", b"application/json")],
    [(b"Content-Type", b"application/json"), (b"content-type", b"text/event-stream")],
    [(b"Content-Type", b"Text/Event-Stream")],
    [(b"X-Type", b"text/event-stream")],
    [],
])
def test_an_event_stream_is_told_as_the_joined_header_value_tells_it(raw):
    assert is_event_stream(raw) == (header_value(raw, b"content-type") or b"").startswith(b"text/event-stream")
