"""What the running proxy holds: settings, its upstream routes, the memory store, metrics.

Built once in the app's lifespan and kept on ``app.state.proxy``; nothing here is global.
"""

import fnmatch
import hmac
from dataclasses import dataclass

from starlette.responses import Response

from proxy.config import Settings
from proxy.errors import error_response
from proxy.forward import RawHeaders, Upstream
from proxy.memory.guarded import GuardedStore
from proxy.metrics import Metrics
from proxy.repair import Policy, Profile
from proxy.tenant import credential, tenant_id


@dataclass(frozen=True)
class UpstreamRoute:
    """An upstream and the profile its requests are repaired for; reached by a path prefix, a model
    pattern, or by default."""

    upstream: Upstream
    profile: Profile
    prefix: str | None = None
    model: str | None = None

    def matches_model(self, model: object) -> bool:
        return self.model is not None and type(model) is str and fnmatch.fnmatchcase(model, self.model)


@dataclass
class ProxyState:
    settings: Settings
    default: UpstreamRoute
    store: GuardedStore  # whichever backend, with the same failure behaviour
    policy: Policy
    metrics: Metrics
    routes: tuple[UpstreamRoute, ...] = ()

    def route_for_path(self, raw_path: bytes) -> tuple[UpstreamRoute, bytes]:
        """The route a path prefix selects (and the path without it), else the default route."""
        for route in self.routes:
            if route.prefix is not None and raw_path.startswith(route.prefix.encode() + b"/"):
                return route, raw_path[len(route.prefix):]
        return self.default, raw_path

    def route_for_model(self, model: object) -> UpstreamRoute:
        return next((route for route in self.routes if route.matches_model(model)), self.default)

    def tenant(self, headers: RawHeaders, route: UpstreamRoute) -> str:
        """Memory is scoped by credential and upstream: one key against two upstreams has two memories."""
        return tenant_id(credential(headers), route.upstream.base_url)

    def authorize(self, headers: RawHeaders, route: UpstreamRoute) -> Response | None:
        """Where the proxy sends its own upstream key, only clients presenting one of ``TOOLMEND_API_KEYS``
        get through."""
        if route.upstream.api_key is None:
            return None
        presented = _bearer(headers)
        if presented is not None and any(hmac.compare_digest(presented, key.encode()) for key in self.settings.api_keys):
            return None
        return error_response(
            401,
            "Incorrect or missing API key for this toolmend proxy: send one of its configured keys as 'Authorization: Bearer <key>'.",
            code="invalid_api_key",
        )


def _bearer(headers: RawHeaders) -> bytes | None:
    for name, value in headers:
        if name.lower() == b"authorization" and value[:7].lower() == b"bearer ":
            return value[7:].strip()
    return None
