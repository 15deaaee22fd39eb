"""What the tests of an upstream refusal toolmend retries once share (AM-14 for Messages, RS-11 for Responses): respx
as the upstream, a route answering a script of responses in turn, and the bodies it received.

``upstream`` is a fixture: a test module that uses it imports it by name."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import respx

from tests.support.proxy_fixtures import UPSTREAM, ScriptedStream

#: How much of an answer's body a respx answer in ``pieces`` yields at a time: far below the 64 KB toolmend reads of
#: a refusal, so a reader that stops at its bound leaves most of the body unread.
PIECE = 1024


@pytest.fixture
def upstream() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=UPSTREAM, assert_all_called=False) as mock:
        yield mock


def scripted(upstream: respx.MockRouter, path: str, *answers: httpx.Response) -> respx.Route:
    """``POST {path}`` answering ``answers`` in turn, one a call (a call beyond them fails the test)."""
    return upstream.post(path).mock(side_effect=list(answers))


def sent(route: respx.Route) -> list[bytes]:
    """The bodies the route received, in order, as bytes."""
    return [call.request.content for call in route.calls]


def pieces(status: int, content: bytes, content_type: str = "application/json", *rest: Exception) -> httpx.Response:
    """An answer whose body arrives ``PIECE`` bytes at a time, as a real upstream's does (respx's own ``content=`` comes
    in one piece), then raises each of ``rest`` (an upstream that breaks off)."""
    items: list = [content[start:start + PIECE] for start in range(0, len(content), PIECE)]
    return httpx.Response(status, headers={"content-type": content_type}, stream=ScriptedStream([*items, *rest]))
