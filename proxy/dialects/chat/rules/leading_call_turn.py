r"""A history whose first tool-call turn comes before any user message (a trimmed window, or an orphan
result whose call was synthesized at the very start).

Gemini requires a function-call turn to follow a user turn. A short user message (``OPENING_TEXT``) is
inserted before that first call turn. Profile ``gemini``. Answers S12, GE-3.

Bad:
    {"role": "system", "content": "You are terse."}
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "system", "content": "You are terse."}
    {"role": "user", "content": "(earlier conversation omitted)"}
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

from typing import Any

from proxy.repair.content import OPENING_TEXT
from proxy.repair.context import Context
from proxy.repair.history import is_call_turn
from proxy.repair.rule import Rule

RULE = Rule("TM308", "leading-call-turn", ("S12", "GE-3"))


def _leading_call_turn(messages: list[Any]) -> int | None:
    for position, message in enumerate(messages):
        if message.get("role") == "user":
            return None
        if is_call_turn(message):
            return position
    return None


def is_clean(messages: list[Any], profile: Any) -> bool:
    return _leading_call_turn(messages) is None


def apply(ctx: Context) -> None:
    position = _leading_call_turn(ctx.messages)
    if position is not None:
        turn = ctx.messages[position]
        ctx.messages.insert(position, {"role": "user", "content": OPENING_TEXT})
        ctx.report(RULE, turn, "inserted", "user message before the first tool-call turn", position)
