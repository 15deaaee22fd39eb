r"""A user or system message right after a tool message, sent to Mistral.

Mistral accepts only an assistant or another tool message after a tool message. A short assistant
message (``BRIDGE_TEXT``) is inserted between the last tool result and what follows, so the history
reads as the model acknowledging the results. Profile ``mistral``. Answers E-MI-2, MI-1.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "a1B2c3D4e", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "a1B2c3D4e", "content": "18C"}
    {"role": "user", "content": "And tomorrow?"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "a1B2c3D4e", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "a1B2c3D4e", "content": "18C"}
    {"role": "assistant", "content": "(tool results received)"}
    {"role": "user", "content": "And tomorrow?"}
"""

import itertools
from typing import Any

from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM302", "mistral-role-bridge", ("E-MI-2", "MI-1"))

BRIDGE_TEXT = "(tool results received)"
NEEDS_BRIDGE = frozenset(("user", "system", "developer"))


def is_clean(messages: list[Any], profile: Any) -> bool:
    return not any(
        before.get("role") == "tool" and after.get("role") in NEEDS_BRIDGE for before, after in itertools.pairwise(messages)
    )


def apply(ctx: Context) -> None:
    # The history is copied with the bridges in place, not edited by ``insert``: each insertion would move every later
    # message, and a long history of tool results followed by user messages became quadratic.
    out: list[Any] = []
    before: Any = None
    for following in ctx.messages:
        if before is not None and before.get("role") == "tool" and following.get("role") in NEEDS_BRIDGE:
            ctx.report(RULE, following, "inserted", f"assistant bridge before a {following.get('role')} message that followed a tool result", len(out))
            out.append({"role": "assistant", "content": BRIDGE_TEXT})
        out.append(following)
        before = following
    if len(out) != len(ctx.messages):
        ctx.messages[:] = out
