"""The repair engine: turns any tool-call history a real agent framework produces into one every strict
provider accepts, changing nothing that was already valid.

    planned = plan(body, profile="openai")   # None: nothing to repair, forward the client's bytes
    result = planned.repair(recalled={...turns remembered for planned.recall...}, policy=Policy())
    # or both steps at once: repair(body, recalled, profile, policy)
    if result.rejected: ...        # policy "reject": answer 400, forward nothing
    elif result.changed: ...       # forward result.body (re-serialized)
    else: ...                      # forward the client's original bytes
"""

from proxy.repair.engine import Plan, Result, needs_repair, plan, repair
from proxy.repair.findings import DEFAULT_PLACEHOLDER, DEFAULT_PLACEHOLDER_NAME, ORPHAN_POLICIES, Finding, OrphanPolicy, Policy
from proxy.repair.history import orphan_call_ids
from proxy.repair.profiles import PROFILES, Profile, get_profile, route_profile

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "DEFAULT_PLACEHOLDER_NAME",
    "ORPHAN_POLICIES",
    "PROFILES",
    "Finding",
    "OrphanPolicy",
    "Plan",
    "Policy",
    "Profile",
    "Result",
    "get_profile",
    "needs_repair",
    "orphan_call_ids",
    "plan",
    "repair",
    "route_profile",
]
