r"""A tool-call turn of the current turn that lost OpenRouter's ``reasoning_details``, sent to a Gemini 3 model
behind OpenRouter: the OpenAI SDK's types have no such field, so many clients drop it.

OpenRouter carries Gemini's thought signature in the ``reasoning.encrypted`` entry of the assistant message's
``reasoning_details`` and wants the list back unmodified; Gemini 3 refuses the calls of the current turn (since the
last user message) without their signature, and OpenRouter answers ``Gemini models require OpenRouter reasoning
details to be preserved in each request.``. The remembered list (captured from the upstream's answer, JSON or
streamed) is put back whole, byte-identical, on every call turn of the current turn that has none (no key, ``null``
or ``[]``); a turn memory holds no list for is left as it is, and a list the client kept is never touched. A request
concerns the rule when its model is Gemini 3 or later (``google/gemini-3-pro-preview``, ``gemini-3.1-flash``...).
Profile ``openrouter``. Answers GE-8.

Request:
    {"model": "google/gemini-3-pro-preview"}
Bad:
    {"role": "user", "content": "Weather in Paris and Oslo?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}, {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    {"role": "tool", "tool_call_id": "call_2", "content": "9C"}
Recalled:
    {"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}, {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}], "content": null, "reasoning_content": null, "reasoning_details": [{"type": "reasoning.text", "text": "Two cities, two calls.", "format": "google-gemini-v1", "index": 0}, {"type": "reasoning.encrypted", "data": "CsUBAdHtim9f", "id": "tool_call_1", "format": "google-gemini-v1", "index": 0}]}
Good:
    {"role": "user", "content": "Weather in Paris and Oslo?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}, {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}], "reasoning_details": [{"type": "reasoning.text", "text": "Two cities, two calls.", "format": "google-gemini-v1", "index": 0}, {"type": "reasoning.encrypted", "data": "CsUBAdHtim9f", "id": "tool_call_1", "format": "google-gemini-v1", "index": 0}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    {"role": "tool", "tool_call_id": "call_2", "content": "9C"}
"""

import re
from collections.abc import Iterator, Mapping
from typing import Any

from proxy.repair.context import Context
from proxy.repair.history import declared_ids, is_call_turn
from proxy.repair.rule import Rule

RULE = Rule("TM312", "reasoning-details", ("GE-8",))

KEY = "reasoning_details"

#: Gemini 3 and later, after any ``org/`` prefix: the models that refuse a call turn without its signature.
_GEMINI_3 = re.compile(r"gemini-(?:[3-9]|[1-9][0-9])")


def applies(request: Mapping[str, Any]) -> bool:
    """Whether ``request`` asks for a Gemini 3 (or later) model."""
    model = request.get("model")
    return type(model) is str and _GEMINI_3.match(model.lower().rpartition("/")[2]) is not None


def _lacking(messages: list[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The call turns of the current turn (after the last user message) without reasoning details, with their positions."""
    start = 0
    for position, message in enumerate(messages):
        if type(message) is dict and message.get("role") == "user":
            start = position + 1
    for position in range(start, len(messages)):
        message = messages[position]
        if is_call_turn(message) and not message.get(KEY):
            yield position, message


def is_clean(messages: list[Any], profile: Any) -> bool:
    # Only memory can tell whether a turn without details ever had some, so any such turn is worth a look.
    return next(_lacking(messages), None) is None


def wanted_ids(messages: list[Any]) -> list[str]:
    """Every call id of the turns that lack details: the client may have dropped or reordered some of their calls."""
    return [cid for _, message in _lacking(messages) for cid in declared_ids(message)]


def apply(ctx: Context) -> None:
    if not applies(ctx.request):
        return
    recalled = ctx.recalled
    for position, message in list(_lacking(ctx.messages)):
        for cid in declared_ids(message):
            turn = recalled.get(cid)
            details = turn.get(KEY) if turn is not None else None
            if type(details) is list and details:
                message[KEY] = details
                ctx.report(RULE, message, "restored", f"{KEY} restored from memory (call {cid})", position)
                break
