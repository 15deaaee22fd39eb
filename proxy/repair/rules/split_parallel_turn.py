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
    # Where the first two call turns in a row stand; most histories have none, and nothing before them changes.
    previous = False
    for later, m in enumerate(ctx.messages):
        current = is_call_turn(m)
        if current and previous:
            start = later - 1
            break
        previous = current
    else:
        return
    # The history is copied with each run of call turns made one, not edited by ``del``, and each run's texts are
    # joined once: deleting, or joining the texts so far, for every turn of a long run was quadratic.
    messages = ctx.messages
    out = messages[:start]
    position, count = start, len(messages)
    while position < count:
        first = messages[position]
        out.append(first)
        end = position + 1
        if is_call_turn(first):
            while end < count and is_call_turn(second := messages[end]):
                first["tool_calls"].extend(second["tool_calls"])
                ctx.report(RULE, second, "merged", f"{len(second['tool_calls'])} call(s) merged into the previous assistant turn", len(out))
                end += 1
            run = messages[position:end]
            for key in ("content", "reasoning_content"):
                if len(run) > 1 and any(key in turn for turn in run):
                    first[key] = _joined([turn.get(key) for turn in run])
        position = end
    messages[:] = out


def _joined(texts: list[Any]) -> Any:
    """The texts of a run of turns, nothing lost: the first when the others are empty; else the non-empty ones, the
    strings joined by a newline until the first that is not one, from which on each is a list of parts, concatenated
    (what joining them two at a time made)."""
    full = [text for text in texts if not is_empty_content(text)]
    if len(full) < 2:
        return full[0] if full else texts[0]
    strings = next((k for k, text in enumerate(full) if type(text) is not str), len(full))
    if strings == len(full):
        return "\n".join(full)
    head = ["\n".join(full[:strings])] if strings else []
    return [part for text in (*head, *full[strings:]) for part in as_parts(text)]
