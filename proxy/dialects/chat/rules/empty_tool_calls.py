r"""An empty ``tool_calls: []`` array, as chat-memory stores save it after dropping the calls.

OpenAI, DeepSeek V4 and DashScope reject the empty array; the key is removed. Answers S8, OAI-4, DS-6, QW-4.

Bad:
    {"role": "user", "content": "Hi"}
    {"role": "assistant", "content": "Hello!", "tool_calls": []}
Good:
    {"role": "user", "content": "Hi"}
    {"role": "assistant", "content": "Hello!"}
"""

from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM204", "empty-tool-calls", ("S8", "OAI-4", "DS-6", "QW-4"))


def apply(ctx: Context) -> None:
    for position, message in enumerate(ctx.messages):
        if message.get("role") == "assistant" and message.get("tool_calls", None) == []:
            del message["tool_calls"]
            ctx.report(RULE, message, "removed", "empty tool_calls array removed", position)
