r"""Empty text on an Anthropic-backed route: ``content: ""`` on a tool-call turn becomes an empty text
block there, and empty text blocks are rejected.

Tool-call turns get ``content: null``; empty text parts are removed from content lists. Profile
``anthropic``. Answers E-CT-NULL, AN-4.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

from typing import Any

from proxy.repair.context import Context
from proxy.repair.history import is_call_turn
from proxy.repair.rule import Rule

RULE = Rule("TM306", "null-content", ("E-CT-NULL", "AN-4"))


def _is_empty_text(part: Any) -> bool:
    return type(part) is dict and part.get("type") == "text" and part.get("text") == ""


def _has_empty_text(message: Any) -> bool:
    content = message.get("content")
    if is_call_turn(message) and (content == "" or content == []):
        return True
    return type(content) is list and any(_is_empty_text(part) for part in content)


def is_clean(messages: list[Any], profile: Any) -> bool:
    return not any(_has_empty_text(message) for message in messages)


def apply(ctx: Context) -> None:
    for position, message in enumerate(ctx.messages):
        if not _has_empty_text(message):
            continue
        content = message["content"]
        if type(content) is list:
            content = [part for part in content if not _is_empty_text(part)]
        if is_call_turn(message) and content in ("", []):
            content = None
        message["content"] = content
        ctx.report(RULE, message, "replaced", "empty text removed" + (" (content null)" if content is None else ""), position)
