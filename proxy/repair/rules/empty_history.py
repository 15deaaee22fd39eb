r"""A history the other rules would leave empty: every message was an unknown tool result dropped under
orphan policy ``drop``, an empty assistant message, or both.

Every provider rejects an empty ``messages`` array, and no message the engine could invent would say what
the client meant, so the request is refused (400) instead of being forwarded empty. This rule runs after
all the others, the profile's included: it is the one place that decides. Answers BASE (section 0 of
docs/provider-rules.md: ``messages`` holds at least one message).

Bad:
    {"role": "assistant", "content": null, "tool_calls": []}
Good:
    (rejected)
"""

from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM210", "empty-history", ("BASE",))


def apply(ctx: Context) -> None:
    if ctx.messages:
        return
    removed_by = ", ".join(dict.fromkeys(finding.code for finding in ctx.findings if finding.action == "removed"))
    ctx.reject(RULE, None, f"the repair removed every message ({removed_by}), leaving nothing to send")
