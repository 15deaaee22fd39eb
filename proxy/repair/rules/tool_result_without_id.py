r"""A tool message without ``tool_call_id``: every strict provider requires it.

When the message's ``name`` matches exactly one call of the request that has no result yet, it answers
that call; a message without ``name`` (a Responses output has none) answers the call when it is the only one
without a result. Otherwise it gets a deterministic id of its own and the orphan rule (TM101) decides: a call is
never made up for a result that could only answer the one already there.
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
    nameless = [(p, m) for p, m in enumerate(ctx.messages) if is_tool(m) and result_id(m) is None]
    if not nameless:
        return
    answered = {result_id(m) for m in ctx.messages if is_tool(m)}
    pending = [call for _, _, _, call in each_call(ctx.messages) if call_id(call) not in answered]
    unanswered: dict[str, int] = {}  # name -> how many unanswered calls have it (a call's name is a string)
    only: dict[str, dict[str, Any]] = {}  # name -> the last unanswered call of that name: the only one when counted once
    for call in pending:
        if (called := call_name(call)) is not None:
            unanswered[called] = unanswered.get(called, 0) + 1
            only[called] = call
    left = len(pending)  # unanswered calls of any name
    attached: set[int] = set()  # the calls this rule gave a result, by identity
    for position, message in nameless:
        name = message.get("name")
        # Without a name there is nothing to match by: only a lone unanswered call is certainly the one it answers.
        if name is None:
            match = next(call for call in pending if id(call) not in attached) if left == 1 else None
        else:
            match = only[name] if isinstance(name, str) and unanswered.get(name, 0) == 1 else None
            if match is not None and id(match) in attached:  # the last of its name went to a result without one
                match = next(call for call in pending if call_name(call) == name and id(call) not in attached)
        if match is not None:
            message["tool_call_id"] = call_id(match)
            attached.add(id(match))
            left -= 1
            if (called := call_name(match)) is not None:
                unanswered[called] -= 1
            named = f" {_named(name)}" if name is not None else ""
            ctx.report(RULE, message, "attached", f"answers the only unanswered call{named} ({message['tool_call_id']})", position)
        else:
            message["tool_call_id"] = stable_id(position, name, prefix="call_tm")
            many = left > 1 if name is None else isinstance(name, str) and unanswered.get(name, 0) > 1
            why = f"{'several' if many else 'no'} unanswered call" + (f" named {_named(name)}" if name is not None else "s, and no name")
            ctx.report(RULE, message, "added", f"{why}; given id {message['tool_call_id']}", position)


def _named(name: Any) -> str:
    """A tool message's ``name`` as the detail quotes it (``shown`` when it is a string)."""
    return repr(shown(name)) if type(name) is str else type(name).__name__
