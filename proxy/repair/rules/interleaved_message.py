r"""A user, system or developer message between a call turn and its results (frameworks inject error
notes, reminders, images).

Strict providers want the results right after the call. The interleaved messages move, unchanged and in
their order, to just after the last result of the block. Answers S1, OAI-2, AZ-1, QW-5, MM-1, RS-17 (DeepSeek's
Responses API), AM-2 (text before the results of a user message). Profiles whose results may stand anywhere
after their call (OpenAI's Responses API) skip it.

Bad:
    {"role": "user", "content": "Weather in Paris and Rome?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}, {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    {"role": "user", "content": "Reminder: answer in Celsius."}
    {"role": "tool", "tool_call_id": "call_2", "content": "24C"}
Good:
    {"role": "user", "content": "Weather in Paris and Rome?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}, {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    {"role": "tool", "tool_call_id": "call_2", "content": "24C"}
    {"role": "user", "content": "Reminder: answer in Celsius."}
"""

from proxy.repair.context import Context
from proxy.repair.findings import listed
from proxy.repair.history import Message, declared_ids
from proxy.repair.rule import Rule

RULE = Rule("TM103", "interleaved-message", ("S1", "OAI-2", "AZ-1", "QW-5", "MM-1", "RS-17", "AM-2"))


def apply(ctx: Context) -> None:
    if not ctx.profile.adjacent_results:
        return  # the provider takes other items between a call and its results (OpenAI's Responses API)
    pairing = ctx.pairing()
    messages = ctx.messages
    count = len(messages)
    # Moving messages within a turn's reach (up to the next assistant message) moves no call turn: each stays where the
    # pairing found it.
    for position, end, declared in pairing.turns:
        # The turn's reach: its block of tool messages first, then the rest. Only a result of the turn after the first
        # message of the rest needs ``_gather_results``. Where every tool message is a result with an id (a string), the
        # block ends where the pairing found it; else it is walked for an id that is no string.
        reach = _block_end(messages, position) if pairing.idless else end
        if reach < 0:  # an id that is no string (TM106 leaves none): the full scan, which tests every id against the turn's
            _gather_results(ctx, position)
            continue
        if reach < count and messages[reach].get("role") != "assistant":
            ids = set(declared)
            while reach < count and (role := messages[reach].get("role")) != "assistant":
                if role == "tool" and messages[reach].get("tool_call_id") in ids:
                    _gather_results(ctx, position)
                    break
                reach += 1


def _block_end(messages: list[Message], turn: int) -> int:
    """Where the block of tool messages after the call turn at ``turn`` ends, or -1 if one of them has an id that is no
    string."""
    reach = turn + 1
    while reach < len(messages) and messages[reach].get("role") == "tool":
        if type(messages[reach].get("tool_call_id")) is not str:
            return -1
        reach += 1
    return reach


def _gather_results(ctx: Context, turn: int) -> None:
    """Within the turn's reach (up to the next assistant message), put its own results first."""
    messages = ctx.messages
    declared = declared_ids(messages[turn])
    ids = set(declared)
    reach, last_own, first_other = turn + 1, -1, -1
    while reach < len(messages) and messages[reach].get("role") != "assistant":
        message = messages[reach]
        if message.get("role") == "tool" and message.get("tool_call_id") in ids:
            last_own = reach
        elif first_other < 0 and message.get("role") != "tool":
            first_other = reach
        reach += 1
    if first_other < 0 or first_other > last_own:
        return
    displaced = [m for m in messages[first_other:last_own] if m.get("role") != "tool"]
    span = messages[turn + 1 : reach]
    own = [m for m in span if m.get("role") == "tool" and m.get("tool_call_id") in ids]
    owned = {id(m) for m in own}
    messages[turn + 1 : reach] = own + [m for m in span if id(m) not in owned]
    block = listed(declared)  # once: every message moved out of a long block names the same calls
    for message in displaced:
        ctx.report(RULE, message, "moved", f"{message.get('role')} message moved after the tool block of {block}", turn)
