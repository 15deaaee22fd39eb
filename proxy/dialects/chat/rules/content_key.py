r"""A message without a ``content`` key, sent to a server that requires it (some vLLM, SGLang and Qwen
builds; TGI before its fix).

The key is added: ``null`` on a tool-call turn, ``""`` elsewhere. Profile ``vllm``. Answers E-CT-KEY,
VL-4, VL-6.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}], "content": null}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

from typing import Any

from proxy.repair.context import Context
from proxy.repair.history import is_call_turn
from proxy.repair.rule import Rule

RULE = Rule("TM310", "content-key", ("E-CT-KEY", "VL-4", "VL-6"))


def is_clean(messages: list[Any], profile: Any) -> bool:
    return all("content" in message for message in messages)


def apply(ctx: Context) -> None:
    for position, message in enumerate(ctx.messages):
        if "content" not in message:
            message["content"] = None if is_call_turn(message) else ""
            ctx.report(RULE, message, "added", f"content key added to a {message.get('role')} message", position)
