"""The repair engine: turns any tool-call history a real agent framework produces into one every strict
provider accepts, changing nothing that was already valid.

    result = repair(body, recall=memory_lookup, profile="openai", policy=Policy(orphans="synthesize"))
    if result.rejected: ...        # policy "reject": answer 400, forward nothing
    elif result.changed: ...       # forward result.body (re-serialized)
    else: ...                      # forward the client's original bytes
"""

from proxy.repair.engine import Result, needs_repair, recall_ids, repair
from proxy.repair.findings import DEFAULT_PLACEHOLDER, DEFAULT_PLACEHOLDER_NAME, ORPHAN_POLICIES, Finding, OrphanPolicy, Policy
from proxy.repair.history import orphan_call_ids
from proxy.repair.profiles import PROFILES, Profile, detect_profile, get_profile

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "DEFAULT_PLACEHOLDER_NAME",
    "ORPHAN_POLICIES",
    "PROFILES",
    "Finding",
    "OrphanPolicy",
    "Policy",
    "Profile",
    "Result",
    "detect_profile",
    "get_profile",
    "needs_repair",
    "orphan_call_ids",
    "recall_ids",
    "repair",
]
