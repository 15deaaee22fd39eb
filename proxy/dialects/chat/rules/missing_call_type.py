r"""A tool call without ``type``: OpenAI and Azure AI Inference require ``"type": "function"``.

Only a missing (or null) type is added; a call of another declared type (say ``custom``) is left alone.
Answers S6, OAI-5, AZ-4.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "function": {"name": "weather", "arguments": "{}"}, "type": "function"}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

from proxy.repair.context import Context
from proxy.repair.history import each_call
from proxy.repair.rule import Rule

RULE = Rule("TM201", "missing-call-type", ("S6", "OAI-5", "AZ-4"))


def apply(ctx: Context) -> None:
    for position, message, number, call in each_call(ctx.messages):
        if call.get("type") is None:
            call["type"] = "function"
            ctx.report(RULE, message, "added", f"tool_calls[{number}] ({call.get('id')}) type 'function'", position)
