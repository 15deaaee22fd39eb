r"""``content: null`` (or a missing or empty-list content) on a message, sent to a provider that wants
a string there: Ollama rejects null everywhere, xAI rejects null and ``[]`` on tool-only assistant
messages, Gemini's compatibility layer rejects null.

The content becomes ``""``. Profiles ``ollama``, ``xai``, ``gemini``. Answers E-CT-EMPTY, OL-1, XA-1, GE-6.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

from typing import Any

from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM305", "empty-string-content", ("E-CT-EMPTY", "OL-1", "XA-1", "GE-6"))


def _needs_string(message: Any) -> bool:
    content = message.get("content")
    return content is None or (content == [] and message.get("role") == "assistant")


def is_clean(messages: list[Any], profile: Any) -> bool:
    return not any(_needs_string(message) for message in messages)


def apply(ctx: Context) -> None:
    for position, message in enumerate(ctx.messages):
        if _needs_string(message):
            was = "missing" if "content" not in message else "null" if message["content"] is None else "[]"
            message["content"] = ""
            ctx.report(RULE, message, "replaced", f"{message.get('role')} content {was} -> \"\"", position)
