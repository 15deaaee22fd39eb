"""Which upstream a request goes to, and the path it asks for there: the one place that decides.

A request is routed by its path prefix first (``/mistral/v1/...``), else to the default route; a repaired
request (any dialect) on the default route then goes to the first route whose model pattern matches. Admission
(``proxy/access.py``) and the tenant (``UpstreamRoute.tenant``) follow the route selected here.

The path is decided on the request target exactly as the client sent it (``raw_path``), and only a path
that cannot leave the upstream's base path is accepted; see ``upstream_path``.
"""

import fnmatch
import re
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from starlette.responses import Response

from proxy.dialects.chat.profiles import model_profile
from proxy.errors import Render, error_response
from proxy.forward import RawHeaders, Upstream
from proxy.repair import Profile
from proxy.tenant import Tenancy

VERSION = b"/v1"
#: Gemini's other API versions: a target below one is Google's, and goes upstream with its version (``gemini_target``).
GOOGLE_VERSIONS = (b"/v1beta/", b"/v1beta1/", b"/v1alpha/")
#: Below ``/v1``, Google's paths (Vertex AI's resources, the Developer API's model methods; never an OpenAI path: an
#: OpenAI model id may hold ':', but no method name follows it).
GOOGLE_BELOW_V1 = re.compile(rb"/v1/(?:projects|publishers)/|/v1/models/[^/]+:(?:generateContent|streamGenerateContent|"
                             rb"countTokens|embedContent|batchEmbedContents|computeTokens|predict)$")
# RFC 3986 path characters: unreserved, sub-delims, ':' and '@', '/', and %XX escapes. Nothing else ('\',
# '#', spaces, controls, raw non-ASCII) is forwarded: some servers read '\' as '/', and the rest would be
# re-encoded on the way, so the upstream would not see what the client sent.
PATH_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/%"
MALFORMED_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")
# The usual path, accepted in one regex call (every request checks its path): segments of those characters
# without '%', none empty or starting with '.'. Anything else takes the full check.
PLAIN_PATH = re.compile(rb"(?:/[A-Za-z0-9\-_~!$&'()*+,;=:@][A-Za-z0-9\-._~!$&'()*+,;=:@]*)+/?|/")
# Printable ASCII but '#', which would end the URL (clients send non-ASCII percent-encoded).
QUERY_CHARACTERS = re.compile(rb"[\x21\x22\x24-\x7e]*")
# Separators a server may see once it has decoded the path (Windows-style servers split on '\').
SEPARATORS = re.compile(rb"[/\\]")
CONTROLS = re.compile(rb"[\x00-\x1f\x7f]")


class InvalidPath(Exception):
    """A request target toolmend will not forward: it could leave the upstream's base path."""

    def response(self, render: Render = error_response) -> Response:
        return render(400, f"toolmend does not forward this request path: {self}.", code="invalid_path")


@dataclass(frozen=True)
class UpstreamRoute:
    """An upstream and the profile its requests are repaired for; reached by a path prefix, a model
    pattern, or by default. ``by_model``: the profile was left ``auto`` and the upstream's host names none, so each
    request's model picks it (``profile`` when it names none either)."""

    upstream: Upstream
    profile: Profile
    prefix: str | None = None
    model: str | None = None
    tenancy: Tenancy = field(default_factory=Tenancy)
    by_model: bool = False

    def matches_model(self, model: object) -> bool:
        return self.model is not None and type(model) is str and fnmatch.fnmatchcase(model, self.model)

    def profile_for(self, model: object) -> Profile:
        """The profile a request for ``model`` is repaired for, whichever dialect it speaks."""
        return (model_profile(model) or self.profile) if self.by_model else self.profile

    def tenant(self, headers: RawHeaders, query: bytes) -> str:
        """Memory is scoped per upstream, then as ``Tenancy`` decides: one key against two upstreams has two memories."""
        return self.tenancy.tenant(headers, query, self.upstream.base_url)


class Router:
    """Selects a request's route: a path prefix, else the default route; then, on the default route, the first
    route whose model pattern matches the body's model. ``select`` is the decision; ``candidates`` says, before
    a body is read, every route the request could still end on (admission is checked against them first)."""

    def __init__(self, default: UpstreamRoute, routes: tuple[UpstreamRoute, ...] = ()) -> None:
        self.default = default
        self.routes = routes
        # A prefix only counts when a version follows it: /mistral must not catch /mistralx/v1/...
        self._prefixes = tuple((route.prefix.encode() + b"/", route) for route in routes if route.prefix is not None)
        self._by_model = tuple(route for route in routes if route.model is not None)

    def select(self, raw_path: bytes, query: bytes, model: object = None) -> tuple[UpstreamRoute, bytes]:
        """The route of a request target and body model, and the path to ask for below the upstream's base URL
        (``/chat/completions``). Raises ``InvalidPath`` for a target that is not safe to forward."""
        route, path = self._by_path(raw_path, query)
        return self._model_route(route, model), path

    def candidates(self, raw_path: bytes, query: bytes) -> tuple[UpstreamRoute, ...]:
        """Every route a request with this target may end on once its body's model is known."""
        return self._reachable(self._by_path(raw_path, query)[0])

    def _by_path(self, raw_path: bytes, query: bytes) -> tuple[UpstreamRoute, bytes]:
        """The route a request target selects by its path, and the path to ask for below the upstream's base
        URL (``/chat/completions``). Raises ``InvalidPath`` for a target that is not safe to forward."""
        if query and not QUERY_CHARACTERS.fullmatch(query):
            raise InvalidPath("the query string must be printable ASCII without '#'")
        for start, route in self._prefixes:
            if raw_path.startswith(start) and (path := _below_version(raw_path[len(start) - 1:])) is not None:
                return route, path
        path = _below_version(raw_path)
        if path is not None:
            return self.default, path
        # Starlette matched the decoded path; the raw one disagrees (an encoded '/' in the prefix or version).
        raise InvalidPath("the route prefix and the version (/v1/, /v1beta/) must be sent unencoded")

    def _model_route(self, route: UpstreamRoute, model: object) -> UpstreamRoute:
        """The final route of a request selected by path: on the default route, the first model route that matches."""
        if route is not self.default or not self._by_model:
            return route
        return next((candidate for candidate in self._by_model if candidate.matches_model(model)), route)

    def _reachable(self, route: UpstreamRoute) -> tuple[UpstreamRoute, ...]:
        """Every route a request selected by path may end on, once its model is known."""
        return (route, *self._by_model) if route is self.default else (route,)


def _below_version(target: bytes) -> bytes | None:
    """The path to ask for below the upstream's base URL, of a target below any route prefix: below ``/v1`` (the
    base URL ends with the version), or, for Google's paths (``gemini_target``), the whole target with its version
    (a Gemini route's base URL is the host alone). None when no version starts it. Raises ``InvalidPath``."""
    if gemini_target(target):
        return upstream_path(target)
    if target.startswith(VERSION + b"/"):
        return upstream_path(target[len(VERSION):])
    return None


def gemini_target(target: bytes) -> bool:
    """Whether a target (below any route prefix) is Google's: below a Gemini version, or a Google path below ``/v1``."""
    return target.startswith(GOOGLE_VERSIONS) or GOOGLE_BELOW_V1.match(target) is not None


def upstream_path(path: bytes) -> bytes:
    """``path`` (below ``/v1``, as sent) if it stays below the upstream's base path however a server reads it.

    Refused: characters outside RFC 3986 paths, and, after percent-decoding as often as a server might,
    a '.' or '..' segment, an empty segment ('//'), or a control character; '\\' counts as a separator.
    Percent-encoded characters are otherwise forwarded as sent: ``meta-llama%2FLlama-3-8B`` is one model
    id, and an encoded '@', '?' or '#' stays inside the path, because the URL's authority is never built
    from client text (``Upstream.url``).
    """
    if PLAIN_PATH.fullmatch(path):
        return path
    if not path.startswith(b"/") or path.translate(None, PATH_BYTES) or MALFORMED_ESCAPE.search(path):
        raise InvalidPath("it has characters outside a URL path, or a malformed %-escape")
    decoded = path
    while b"%" in decoded and (once := unquote_to_bytes(decoded)) != decoded:
        decoded = once
    if CONTROLS.search(decoded):
        raise InvalidPath("it encodes a control character")
    *inner, last = SEPARATORS.split(decoded)[1:]
    if any(segment in (b"", b".", b"..") for segment in inner) or last in (b".", b".."):
        raise InvalidPath("it has a '.', '..' or empty segment, plain or percent-encoded")
    return path
