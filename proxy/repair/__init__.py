"""The dialect-free repair engine: what a rule is (``rule.py``), what it reports (``findings.py``), the state one pass
shares (``context.py``), a profile (``profile.py``), a dialect's pipeline as data (``pipeline.py``), the ``Result`` of
a pass (``engine.py``) and the rules every dialect shares (``rules/``). Each dialect (``proxy/dialects/``) plans and
repairs its own requests with them:

    planned = CHAT.plan(body, CHAT.profile("openai"))   # None: nothing to repair, forward the client's bytes
    result = planned.repair(recalled={...turns remembered for planned.recall...}, policy=Policy())
    if result.rejected: ...        # policy "reject": answer 400, forward nothing
    elif result.changed: ...       # forward result.body (re-serialized)
    else: ...                      # forward the client's original bytes
"""

from proxy.repair.engine import Result
from proxy.repair.findings import DEFAULT_PLACEHOLDER, DEFAULT_PLACEHOLDER_NAME, ORPHAN_POLICIES, Finding, OrphanPolicy, Policy
from proxy.repair.history import orphan_call_ids
from proxy.repair.profile import Profile

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "DEFAULT_PLACEHOLDER_NAME",
    "ORPHAN_POLICIES",
    "Finding",
    "OrphanPolicy",
    "Policy",
    "Profile",
    "Result",
    "orphan_call_ids",
]
