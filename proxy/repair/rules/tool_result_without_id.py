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

from proxy.repair.context import Context, stable_id
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
    unanswered = [call for _, _, _, call in each_call(ctx.messages) if call_id(call) not in answered]
    for position, message in nameless:
        name = message.get("name")
        # Without a name there is nothing to match by: only a lone unanswered call is certainly the one it answers.
        matches = unanswered if name is None else [call for call in unanswered if call_name(call) == name]
        if len(matches) == 1:
            message["tool_call_id"] = call_id(matches[0])
            unanswered.remove(matches[0])
            named = f" {name!r}" if name is not None else ""
            ctx.report(RULE, message, "attached", f"answers the only unanswered call{named} ({message['tool_call_id']})", position)
        else:
            message["tool_call_id"] = stable_id(position, name, prefix="call_tm")
            why = f"{'several' if matches else 'no'} unanswered call" + (f" named {name!r}" if name is not None else "s, and no name")
            ctx.report(RULE, message, "added", f"{why}; given id {message['tool_call_id']}", position)
