"""Which protocol a request speaks, decided once from its path when its head arrives: the one place that maps paths
to dialects. The decision (a ``Protocol``) is kept in the request's scope; the endpoint that repairs it, the metric
label it is counted under and the shape of every error toolmend makes for it are all read off that decision.

This module knows no dialect by name: the application hands it the dialects it serves (``Protocols``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.types import Scope

from proxy.errors import Render, error_response

if TYPE_CHECKING:
    from proxy.dialects.dialect import Dialect

QUIET_PATHS = frozenset(("/healthz", "/readyz", "/metrics"))  # probes: counted, logged at debug only
VERSION = "/v1"


@dataclass(frozen=True, slots=True)
class Protocol:
    """What a request's path says about it: its metrics ``label``, its ``error`` shape, and the ``dialect`` whose
    endpoint repairs it (None on every other path, errors included)."""

    label: str
    error: Render
    dialect: Dialect | None = None


#: A path nothing else claims: OpenAI's error shape.
OTHER = Protocol("other", error_response)
PASSTHROUGH = Protocol("passthrough", error_response)


class Protocols:
    """The protocol of each path: a dialect's repaired endpoints (``/v1`` + each of its ``paths``, or a path its
    ``path_pattern`` matches; also below each route prefix) are that dialect's; a path below one of them
    (``/v1/messages/batches``), or one its ``api_pattern`` finds (Gemini's ``/v1beta/models``), passes through in its
    error shape; a path every protocol shares (``/v1/models``) takes
    the shape of the dialect whose header the client sends (``by_header``: ``anthropic-version``), else OpenAI's."""

    def __init__(self, dialects: Iterable[Dialect], prefixes: Iterable[str] = (), by_header: dict[bytes, Dialect] | None = None) -> None:
        self.dialects = tuple(dialects)
        self.by_header = {name.lower(): Protocol("passthrough", dialect.error) for name, dialect in (by_header or {}).items()}
        repaired = {dialect: Protocol(dialect.name, dialect.error, dialect) for dialect in self.dialects}
        self.endpoints = {root + VERSION + path: repaired[dialect]
                          for dialect in self.dialects for path in dialect.paths for root in ("", *prefixes)}
        self._roots = frozenset(("", *prefixes))
        self._patterns = tuple((dialect.path_pattern, repaired[dialect]) for dialect in self.dialects if dialect.path_pattern is not None)
        self._below = tuple((VERSION + dialect.path, Protocol("passthrough", dialect.error)) for dialect in self.dialects if dialect.path)
        self._apis = tuple((dialect.api_pattern, Protocol("passthrough", dialect.error)) for dialect in self.dialects
                           if dialect.api_pattern is not None)
        self._quiet = {path: Protocol(path.strip("/"), error_response) for path in QUIET_PATHS}

    def of(self, path: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> Protocol:
        """The protocol of a request for ``path`` (as decoded) with these ``headers``."""
        found = self.endpoints.get(path)
        if found is not None:
            return found
        for pattern, protocol in self._patterns:
            match = pattern.search(path)
            if match is not None and match.end() == len(path) and path[:match.start()] in self._roots:
                return protocol
        if path in self._quiet:
            return self._quiet[path]
        for pattern, protocol in self._apis:
            if pattern.search(path) is not None:
                return protocol
        if "/v1/" not in path:
            return OTHER
        for endpoint, below in self._below:
            if path.endswith(endpoint) or endpoint + "/" in path:
                return below
        if self.by_header:
            for name, _ in headers:
                shaped = self.by_header.get(name.lower())
                if shaped is not None:
                    return shaped
        return PASSTHROUGH


def protocol_of(scope: Scope) -> Protocol:
    """The request's protocol as the observing layer decided it (``Observer``); OpenAI's for a request it did not see
    (a bare handler in a test)."""
    protocol = scope.get("state", {}).get("protocol")
    return protocol if protocol is not None else OTHER


def error_shape_of(scope: Scope) -> Render:
    """The request's error shape: every error toolmend makes for a request after its head arrived comes in it, whichever
    layer makes it."""
    return protocol_of(scope).error
