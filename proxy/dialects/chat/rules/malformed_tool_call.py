r"""A ``tool_calls`` entry that is not an object, or lacks its ``id``, ``function`` or function name.

An entry that is not an object carries nothing usable and is removed. A missing id gets a deterministic
one; a missing or empty name gets the policy's placeholder name, so the call stays visible to the model.
Answers S6, AN-5 (id required), OAI-7 (non-empty name).

Bad:
    {"role": "user", "content": "Go"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "", "arguments": "{}"}}, "call_2"]}
    {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
Good:
    {"role": "user", "content": "Go"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "unknown_tool", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
"""

from proxy.repair.context import Context, stable_id
from proxy.repair.history import call_id, call_name
from proxy.repair.rule import Rule

RULE = Rule("TM209", "malformed-tool-call", ("S6", "AN-5", "OAI-7"))


def apply(ctx: Context) -> None:
    for position, message in enumerate(ctx.messages):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if type(calls) is not list:
            continue
        kept = []
        for number, call in enumerate(calls):
            if type(call) is not dict:
                ctx.report(RULE, message, "removed", f"tool_calls[{number}] is not an object", position)
                continue
            if call.get("type") not in (None, "function"):
                kept.append(call)  # another declared call type (OpenAI "custom" tools): not ours to judge
                continue
            if call_id(call) is None:
                call["id"] = stable_id(position, number)
                ctx.report(RULE, message, "added", f"tool_calls[{number}] had no id; now {call['id']}", position)
            if call_name(call) is None:
                function = call.get("function")
                if type(function) is not dict:
                    function = call["function"] = {"arguments": "{}"}
                function["name"] = ctx.policy.placeholder_name
                ctx.report(RULE, message, "added", f"tool_calls[{number}] had no function name", position)
            kept.append(call)
        if len(kept) != len(calls):
            message["tool_calls"] = kept
