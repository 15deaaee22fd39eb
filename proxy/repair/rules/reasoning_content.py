r"""An assistant tool-call turn without ``reasoning_content``, sent to DeepSeek (thinking mode) or Kimi.

Both require the reasoning of every turn that made tool calls to be passed back. The remembered
reasoning (captured from the upstream's answer, JSON or streamed) is restored when the client dropped it;
when nothing is remembered the field is set to ``""``, which DeepSeek accepts. Profile ``deepseek``.
Answers E-RC, DS-3, DS-4, KI-4.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Recalled:
    {"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}], "content": null, "reasoning_content": "The user wants the weather; call the tool."}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}], "reasoning_content": "The user wants the weather; call the tool."}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

from typing import Any

from proxy.repair.context import Context
from proxy.repair.history import declared_ids, is_call_turn
from proxy.repair.rule import Rule

RULE = Rule("TM304", "reasoning-content", ("E-RC", "DS-3", "DS-4", "KI-4"))


def _lacks_reasoning(message: Any) -> bool:
    return is_call_turn(message) and type(message.get("reasoning_content")) is not str


def is_clean(messages: list[Any], profile: Any) -> bool:
    return not any(_lacks_reasoning(message) for message in messages)


def wanted_ids(messages: list[Any]) -> list[str]:
    """The first call id of every turn without reasoning: enough to recall the turn."""
    return [declared_ids(m)[0] for m in messages if _lacks_reasoning(m) and declared_ids(m)]


def apply(ctx: Context) -> None:
    lacking = [(p, m) for p, m in enumerate(ctx.messages) if _lacks_reasoning(m)]
    if not lacking:
        return
    recalled = ctx.recalled
    for position, message in lacking:
        ids = declared_ids(message)
        turn = recalled.get(ids[0]) if ids else None
        remembered = turn.get("reasoning_content") if turn is not None else None
        message["reasoning_content"] = remembered if type(remembered) is str else ""
        source = "restored from memory" if type(remembered) is str else "set to \"\" (nothing remembered)"
        ctx.report(RULE, message, "added", f"reasoning_content {source}", position)
