"""What the running proxy holds: settings, the upstream client, the memory store, the repair profile.

Built once in the app's lifespan and kept on ``app.state.proxy``; nothing here is global.
"""

import hmac
from dataclasses import dataclass

from starlette.responses import Response

from proxy.config import Settings
from proxy.errors import error_response
from proxy.forward import RawHeaders, Upstream
from proxy.memory.guarded import GuardedStore
from proxy.repair import Policy, Profile
from proxy.tenant import credential, tenant_id


@dataclass
class ProxyState:
    settings: Settings
    upstream: Upstream
    store: GuardedStore  # whichever backend, with the same failure behaviour
    profile: Profile
    policy: Policy

    def tenant(self, headers: RawHeaders) -> str:
        return tenant_id(credential(headers), self.upstream.base_url)

    def authorize(self, headers: RawHeaders) -> Response | None:
        """In upstream-key mode, only clients presenting one of ``TOOLMEND_API_KEYS`` get through."""
        if self.settings.upstream_api_key is None:
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
