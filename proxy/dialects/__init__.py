"""The wire protocols toolmend repairs, one package each, behind one seam (``dialect.py``).

Adding a protocol is adding a package that implements ``Dialect`` (its view of the history, its capture,
profiles, errors and own rules) and naming it here; the request path, memory, metrics and the structural
rules are shared.
"""

from proxy.dialects.chat import CHAT
from proxy.dialects.dialect import Dialect
from proxy.dialects.messages import MESSAGES
from proxy.dialects.responses import RESPONSES
from proxy.errors import Render, error_response

#: Every repaired endpoint, by dialect.
DIALECTS: tuple[Dialect, ...] = (CHAT, RESPONSES, MESSAGES)


def error_shape(path: str) -> Render:
    """The error shape of a path's protocol: a dialect's, for its endpoint and the paths under it (Anthropic's for
    ``/v1/messages/count_tokens``, also below a route prefix), else OpenAI's. Pass-through errors use it too."""
    for dialect in DIALECTS:
        endpoint = "/v1" + dialect.path
        if path.endswith(endpoint) or endpoint + "/" in path:
            return dialect.error
    return error_response


__all__ = ["CHAT", "DIALECTS", "MESSAGES", "RESPONSES", "Dialect", "error_shape"]
