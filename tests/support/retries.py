"""What the tests of an upstream refusal toolmend retries once share (AM-14 for Messages, RS-11 and RS-8 for
Responses): a route of the respx upstream (the ``upstream`` fixture of tests/conftest.py) answering a script of responses
in turn, the bodies it received, and the body the request path would send again."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import respx

from proxy.dialects.dialect import ListHistory, retry
from proxy.dialects.refusal import Leaving, chosen, read
from proxy.repair import Policy, Profile
from tests.support.proxy_fixtures import ScriptedStream

#: How much of an answer's body a respx answer in ``pieces`` yields at a time: far below the 64 KB toolmend reads of
#: a refusal, so a reader that stops at its bound leaves most of the body unread.
PIECE = 1024


def scripted(upstream: respx.MockRouter, path: str, *answers: httpx.Response) -> respx.Route:
    """``POST {path}`` answering ``answers`` in turn, one a call (a call beyond them fails the test)."""
    return upstream.post(path).mock(side_effect=list(answers))


def sent(route: respx.Route) -> list[bytes]:
    """The bodies the route received, in order, as bytes."""
    return [call.request.content for call in route.calls]


def retry_of(dialect: ListHistory, status: int, error: bytes, sent: dict[str, Any], profile: Profile,
             policy: Policy) -> tuple[bytes, Counter[str]] | None:
    """What the request path sends once more after ``dialect``'s upstream answered ``status`` with the body ``error``
    to ``sent``, memory knowing nothing (``None``: the answer goes to the client)."""
    refusal = read(status, error) if dialect.retries(status, policy) else None
    fix = dialect.fix_for(refusal, policy) if refusal is not None else None
    if fix is None or refusal is None:
        return None
    leaving = chosen(refusal, fix.blobs.carried(sent), frozenset()) if fix.blobs is not None else Leaving(refusal=refusal)
    return retry(fix, sent, profile, policy, leaving)
def pieces(status: int, content: bytes, content_type: str = "application/json", *rest: Exception) -> httpx.Response:
    """An answer whose body arrives ``PIECE`` bytes at a time, as a real upstream's does (respx's own ``content=`` comes
    in one piece), then raises each of ``rest`` (an upstream that breaks off)."""
    items: list = [content[start:start + PIECE] for start in range(0, len(content), PIECE)]
    return httpx.Response(status, headers={"content-type": content_type}, stream=ScriptedStream([*items, *rest]))
