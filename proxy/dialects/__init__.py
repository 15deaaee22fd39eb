"""The wire protocols toolmend repairs, one package each, behind one seam (``dialect.py``).

Adding a protocol is adding a package that implements ``Dialect`` (its view of the history, its capture,
profiles, errors and own rules) and naming it here; the request path, memory, metrics and the structural
rules are shared.
"""

from collections.abc import Iterable

from proxy.dialects.chat import CHAT
from proxy.dialects.dialect import Dialect
from proxy.dialects.gemini import GEMINI
from proxy.dialects.messages import MESSAGES
from proxy.dialects.responses import RESPONSES
from proxy.errors import Render, error_response

#: Every repaired endpoint, by dialect.
DIALECTS: tuple[Dialect, ...] = (CHAT, RESPONSES, MESSAGES, GEMINI)


def error_shape(path: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> Render:
    """The error shape of a request's protocol: a dialect's, for its endpoints and the paths under them
    (Anthropic's for ``/v1/messages/batches``, also below a route prefix); on a path every protocol shares
    (``/v1/models``), Anthropic's for a client that says it speaks Anthropic's API (``anthropic-version``);
    else OpenAI's. Pass-through errors use it too."""
    for dialect in DIALECTS:
        if dialect.speaks(path):
            return dialect.error
    if any(name.lower() == b"anthropic-version" for name, _ in headers):
        return MESSAGES.error
    return error_response


__all__ = ["CHAT", "DIALECTS", "GEMINI", "MESSAGES", "RESPONSES", "Dialect", "error_shape"]
