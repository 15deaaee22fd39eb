r"""A tool message without ``tool_call_id``: every strict provider requires it.

When the message's ``name`` matches exactly one call of the request that has no result yet, it answers
that call. Otherwise it gets a deterministic id of its own and the orphan rule (TM101) decides.
Answers OAI-3, AZ-5, GR-3, MI-4 ("Tool call id has to be defined"), RS-15 (an output without ``call_id``).

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "name": "weather", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "name": "weather", "content": "18C", "tool_call_id": "call_1"}
"""

from typing import Any

from proxy.repair.context import Context, stable_id
from proxy.repair.findings import shown
from proxy.repair.history import call_id, call_name, each_call, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM106", "tool-result-without-id", ("OAI-3", "AZ-5", "GR-3", "MI-4", "RS-15"))


def apply(ctx: Context) -> None:
    # history.is_tool and result_id, written out (this runs over every message, and almost always finds none)
    nameless = [(p, m) for p, m in enumerate(ctx.messages)
                if type(m) is dict and m.get("role") == "tool" and not (type(rid := m.get("tool_call_id")) is str and rid)]
    if not nameless:
        return
    answered = {result_id(m) for m in ctx.messages if is_tool(m)}
    unanswered: dict[str, int] = {}  # name -> how many unanswered calls have it (a call's name is a string)
    only: dict[str, dict[str, Any]] = {}  # name -> the last unanswered call of that name: the only one when counted once
    for _, _, _, call in each_call(ctx.messages):
        if call_id(call) not in answered and (called := call_name(call)) is not None:
            unanswered[called] = unanswered.get(called, 0) + 1
            only[called] = call
    for position, message in nameless:
        name = message.get("name")
        matches = unanswered.get(name, 0) if isinstance(name, str) else 0
        if isinstance(name, str) and matches == 1:
            message["tool_call_id"] = call_id(only[name])
            unanswered[name] = 0
            ctx.report(RULE, message, "attached", f"answers the only unanswered call {_named(name)} ({message['tool_call_id']})", position)
        else:
            message["tool_call_id"] = stable_id(position, name, prefix="call_tm")
            why = "several" if matches else "no"
            ctx.report(RULE, message, "added", f"{why} unanswered call named {_named(name)}; given id {message['tool_call_id']}", position)


def _named(name: Any) -> str:
    """A tool message's ``name`` as the detail quotes it (``shown`` when it is a string)."""
    return repr(shown(name)) if type(name) is str else type(name).__name__ if name is not None else "None"
