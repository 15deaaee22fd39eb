"""What the running proxy holds: settings, its router and access rules, the memory store, metrics.

Built once in the app's lifespan and kept on ``app.state.proxy``; nothing here is global.
"""

from dataclasses import dataclass

from proxy.access import Access
from proxy.config import Settings
from proxy.memory.guarded import GuardedStore
from proxy.memory.refusals import Noted
from proxy.metrics import Metrics
from proxy.repair import Policy
from proxy.router import Router


@dataclass
class ProxyState:
    settings: Settings
    router: Router
    access: Access
    store: GuardedStore  # whichever backend, with the same failure behaviour
    policy: Policy
    metrics: Metrics
    refusals: Noted  # the memory scopes with refusals remembered in the store
