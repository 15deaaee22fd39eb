r"""A call id declared more than once in the request (models reuse ids; Kimi's repeat across turns).

Anthropic, Mistral and MiniMax reject duplicates. Each later declaration is renamed deterministically
(``<id>_2``, ``<id>_3``...) and the tool messages that follow it with that id are renamed the same way,
in encounter order. Answers S4, AN-3, MI-3, MM-2, KI-5, RS-23, AM-6.

Bad:
    {"role": "user", "content": "Two lookups"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "functions.eval:1", "type": "function", "function": {"name": "eval", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "functions.eval:1", "content": "1"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "functions.eval:1", "type": "function", "function": {"name": "eval", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "functions.eval:1", "content": "2"}
Good:
    {"role": "user", "content": "Two lookups"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "functions.eval:1", "type": "function", "function": {"name": "eval", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "functions.eval:1", "content": "1"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "functions.eval:1_2", "type": "function", "function": {"name": "eval", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "functions.eval:1_2", "content": "2"}
"""

from proxy.repair.context import Context
from proxy.repair.findings import shown
from proxy.repair.history import call_id, is_call_turn, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM107", "duplicate-call-id", ("S4", "AN-3", "MI-3", "MM-2", "KI-5", "RS-23", "AM-6"))


def apply(ctx: Context) -> None:
    # Until one is renamed the ids seen are the ids as written: without a repeated one nothing is renamed, calls or results.
    if not ctx.pairing().repeated:
        return
    seen: set[str] = set()
    current: dict[str, str] = {}  # id as the client wrote it -> id of its latest declaration
    suffixes: dict[str, int] = {}  # id as the client wrote it -> the suffix its next rename tries first
    for position, message in enumerate(ctx.messages):
        if is_call_turn(message):
            for call in message["tool_calls"]:
                original = call_id(call)
                if original is None:
                    continue
                if original in seen:
                    call["id"] = _unused(original, seen, suffixes)
                    ctx.report(RULE, message, "renamed", f"duplicate call id {shown(original)} -> {shown(call['id'])}", position)
                seen.add(call["id"])
                current[original] = call["id"]
        elif is_tool(message):
            original = result_id(message)
            if original is not None and current.get(original, original) != original:
                message["tool_call_id"] = current[original]
                ctx.report(RULE, message, "renamed", f"result of duplicate call id {shown(original)} -> {shown(current[original])}", position)


def _unused(original: str, seen: set[str], suffixes: dict[str, int]) -> str:
    """The first ``<original>_<n>`` (n from 2) not in ``seen``. The ids seen only grow, so the search for an id's next
    rename starts past its last one: an id declared a thousand times is not tried against every earlier rename."""
    suffix = suffixes.get(original, 2)
    while f"{original}_{suffix}" in seen:
        suffix += 1
    suffixes[original] = suffix + 1
    return f"{original}_{suffix}"
