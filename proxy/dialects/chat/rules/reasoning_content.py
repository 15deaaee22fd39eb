r"""An assistant tool-call turn without ``reasoning_content``, sent to DeepSeek or Kimi in thinking mode.

In thinking mode both require the reasoning of every turn that made tool calls to be passed back; outside it they
take the history as sent, so the rule changes nothing there. A request thinks (``thinks``, which the fast check asks
too) when its ``thinking`` says ``enabled``; not when it says ``disabled``; else when the history already carries
``reasoning_content``; else by its model: every DeepSeek or Kimi model but those known never to think
(``deepseek-chat``, ``deepseek-coder*``, ``moonshot-v1*``, Kimi K2 before K2.5 but ``kimi-k2-thinking*``; a model
whose thinking is unknown counts as thinking: an extra ``""`` is harmless, a refusal is not), and no other
provider's model. The remembered reasoning (captured from the upstream's answer, JSON or streamed) is restored when
the client dropped it; when nothing is remembered the field is set to ``""``, which DeepSeek accepts. Profile
``deepseek``. Answers E-RC, DS-3, DS-4, KI-4.

Request:
    {"model": "deepseek-reasoner"}
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

import re
from collections.abc import Mapping
from typing import Any

from proxy.repair.context import Context
from proxy.repair.history import declared_ids, is_call_turn
from proxy.repair.rule import Rule

RULE = Rule("TM304", "reasoning-content", ("E-RC", "DS-3", "DS-4", "KI-4"))

#: DeepSeek's and Kimi's model names (after any ``org/`` prefix), and those of them known never to think: DeepSeek's
#: chat and coder models, Moonshot v1, Kimi K2 before K2.5 (``kimi-k2``, ``kimi-k2-0905-preview``) but its thinking one.
_THEIRS = re.compile(r"deepseek|kimi|moonshot")
_NEVER_THINKING = re.compile(r"deepseek-(?:chat|coder)|moonshot-v1|kimi-k2(?:$|-(?!thinking))")


def _thinking_model(model: Any) -> bool:
    if type(model) is not str:
        return True  # no model named: it may think
    name = model.lower().rpartition("/")[2]
    if "thinking" in name or "reasoner" in name:
        return True
    return _THEIRS.match(name) is not None and _NEVER_THINKING.match(name) is None


def applies(request: Mapping[str, Any]) -> bool:
    """Whether ``request`` is, or may be, in thinking mode: its ``thinking`` type when it says ``enabled`` or
    ``disabled``; else a history already carrying ``reasoning_content``, or a model that thinks or may."""
    thinking = request.get("thinking")
    kind = thinking.get("type") if type(thinking) is dict else None
    if kind == "enabled" or kind == "disabled":
        return kind == "enabled"
    if _thinking_model(request.get("model")):
        return True
    messages = request.get("messages")
    return type(messages) is list and any(type(m) is dict and m.get("role") == "assistant"
                                          and type(m.get("reasoning_content")) is str for m in messages)


def _lacks_reasoning(message: Any) -> bool:
    return is_call_turn(message) and type(message.get("reasoning_content")) is not str


def is_clean(messages: list[Any], profile: Any) -> bool:
    return not any(_lacks_reasoning(message) for message in messages)


def wanted_ids(messages: list[Any]) -> list[str]:
    """The first call id of every turn without reasoning: enough to recall the turn."""
    return [declared_ids(m)[0] for m in messages if _lacks_reasoning(m) and declared_ids(m)]


def apply(ctx: Context) -> None:
    if not applies(ctx.request):
        return
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
