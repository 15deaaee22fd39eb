r"""Parallel calls stored as consecutive assistant messages, each with part of the calls, results after.

The first assistant's calls are left unanswered before the second assistant, which OpenAI, Mistral and
MiniMax reject. The turns are merged into one assistant message (calls in order; texts joined).
Answers S1, MI-2, MM-1.

Bad:
    {"role": "user", "content": "Weather in Paris and Rome?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    {"role": "tool", "tool_call_id": "call_2", "content": "24C"}
Good:
    {"role": "user", "content": "Weather in Paris and Rome?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}, {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    {"role": "tool", "tool_call_id": "call_2", "content": "24C"}
"""

from typing import Any

from proxy.repair.content import as_parts
from proxy.repair.context import Context
from proxy.repair.history import is_call_turn, is_empty_content
from proxy.repair.rule import Rule

RULE = Rule("TM105", "split-parallel-turn", ("S1", "MI-2", "MM-1"))


def apply(ctx: Context) -> None:
    # Where the first two call turns in a row stand (history.is_call_turn, written out: this runs over every
    # message); most histories have none, and nothing before them changes.
    previous = False
    for later, m in enumerate(ctx.messages):
        current = type(m) is dict and m.get("role") == "assistant" and type(calls := m.get("tool_calls")) is list and len(calls) > 0
        if current and previous:
            position = later - 1
            break
        previous = current
    else:
        return
    while position + 1 < len(ctx.messages):
        first, second = ctx.messages[position], ctx.messages[position + 1]
        if is_call_turn(first) and is_call_turn(second):
            first["tool_calls"].extend(second["tool_calls"])
            for key in ("content", "reasoning_content"):
                if key in second or key in first:
                    first[key] = _joined(first.get(key), second.get(key))
            del ctx.messages[position + 1]
            ctx.report(RULE, second, "merged", f"{len(second['tool_calls'])} call(s) merged into the previous assistant turn", position + 1)
        else:
            position += 1


def _joined(first: Any, second: Any) -> Any:
    """Both texts, nothing lost: the non-empty one, or both joined by a newline (lists concatenated)."""
    if is_empty_content(second):
        return first
    if is_empty_content(first):
        return second
    if type(first) is str and type(second) is str:
        return first + "\n" + second
    return as_parts(first) + as_parts(second)
