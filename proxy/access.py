"""Who may use a route: decided for the route the Router selected, never before.

A route that sends the operator's own upstream key (``TOOLMEND_UPSTREAM_API_KEY`` or a route's
``api_key_env``) admits only clients presenting one of toolmend's client keys as ``Authorization: Bearer`` or ``x-api-key``
(``TOOLMEND_API_KEYS`` and the keys of the route file's named tenants, ``Settings.client_keys``);
a route without a key of its own admits anyone, whose credentials go upstream as the client's own
(``Upstream.request_headers`` keeps a toolmend key from ever going along). ``--require-client-key``
refuses, on every route, requests that carry no credential at all.
"""

from collections.abc import Iterable

from starlette.responses import Response

from proxy import credentials
from proxy.errors import Render, error_response
from proxy.forward import RawHeaders
from proxy.router import UpstreamRoute


class Denied(Exception):
    """The client may not use the route: a 401 in the OpenAI shape."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code

    def response(self, render: Render = error_response) -> Response:
        return render(401, str(self), code=self.code)


class Access:
    def __init__(self, client_keys: Iterable[str], require_client_key: bool, carriers: credentials.Carriers = credentials.BUILT_IN) -> None:
        self.client_keys = frozenset(key.encode() for key in client_keys)
        self.require_client_key = require_client_key
        self.carriers = carriers

    def check(self, headers: RawHeaders, query: bytes, routes: Iterable[UpstreamRoute]) -> None:
        """Raises ``Denied`` unless the client may use at least one of ``routes``: the selected route, or
        the routes a chat completion may still end on before its body is read."""
        if self.require_client_key and not self.carriers.present(headers, query):
            raise Denied("This toolmend proxy requires a credential: send your API key, e.g. as 'Authorization: Bearer <key>'.",
                         "missing_api_key")
        for route in routes:
            if route.upstream.api_key is None:
                return  # a route that sends no key of toolmend's: the client brings its own
        if not self.presents_client_key(headers, query):
            raise Denied("Incorrect or missing API key for this toolmend proxy: send one of its configured keys as "
                         "'Authorization: Bearer <key>' (or, from an Anthropic client, 'x-api-key: <key>').", "invalid_api_key")

    def presents_client_key(self, headers: RawHeaders, query: bytes = b"") -> bool:
        return any(credentials.is_one_of(key, self.client_keys) for key in credentials.presented_keys(headers, query))
