r"""A user, system or developer message between a call turn and its results (frameworks inject error
notes, reminders, images).

Strict providers want the results right after the call. The interleaved messages move, unchanged and in
their order, to just after the last result of the block. Answers S1, OAI-2, AZ-1, QW-5, MM-1.

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
from proxy.repair.history import call_turns, declared_ids, is_assistant, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM103", "interleaved-message", ("S1", "OAI-2", "AZ-1", "QW-5", "MM-1"))


def apply(ctx: Context) -> None:
    messages = ctx.messages
    for turn in call_turns(messages):
        ids = set(declared_ids(messages[turn]))
        reach = turn + 1  # the turn's reach ends at the next assistant message
        while reach < len(messages) and not is_assistant(messages[reach]):
            reach += 1
        span = messages[turn + 1 : reach]
        own = {id(m) for m in span if is_tool(m) and result_id(m) in ids}
        last_own = max((i for i, m in enumerate(span) if id(m) in own), default=-1)
        displaced = [m for m in span[:last_own] if not is_tool(m)]
        if not displaced:
            continue
        messages[turn + 1 : reach] = [m for m in span if id(m) in own] + [m for m in span if id(m) not in own]
        for message in displaced:
            ctx.report(RULE, message, "moved", f"{message.get('role')} message moved after the tool block of {sorted(ids)}", turn)
