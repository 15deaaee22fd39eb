r"""A tool call the client kept but stripped of Gemini's ``extra_content`` (the thought signature):
many frameworks drop fields they do not know.

Gemini 3 rejects a replayed call without its signature. The call's extra fields are restored from the
proxy's memory, byte-identical, when it remembers them. Profile ``gemini``. Answers E-GE-SIG, GE-4.

Bad:
    {"role": "user", "content": "Run ls"}
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"ls\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "README.md"}
Recalled:
    {"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"ls\"}"}, "extra_content": {"google": {"thought_signature": "CsUBAdHtim9f"}}}], "content": null, "reasoning_content": null}
Good:
    {"role": "user", "content": "Run ls"}
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"ls\"}"}, "extra_content": {"google": {"thought_signature": "CsUBAdHtim9f"}}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "README.md"}
"""

from typing import Any

from proxy.repair.context import Context
from proxy.repair.history import call_id, each_call
from proxy.repair.rule import Rule

RULE = Rule("TM307", "thought-signature", ("E-GE-SIG", "GE-4"))

KEY = "extra_content"


def _unsigned(messages: list[Any]) -> list[str]:
    return [cid for _, _, _, call in each_call(messages) if KEY not in call and (cid := call_id(call)) is not None]


def is_clean(messages: list[Any], profile: Any) -> bool:
    # Only memory can tell whether an unsigned call ever had a signature, so any unsigned call is worth a look.
    return not _unsigned(messages)


def wanted_ids(messages: list[Any]) -> list[str]:
    return _unsigned(messages)


def apply(ctx: Context) -> None:
    ids = _unsigned(ctx.messages)
    if not ids:
        return
    recalled = ctx.recalled
    # Each remembered turn's calls by id, made once per turn: a turn of many calls is not searched for each of them.
    by_turn: dict[int, dict[str, Any]] = {}
    for position, message, number, call in each_call(ctx.messages):
        cid = call_id(call)
        if KEY in call or cid is None or cid not in recalled:
            continue
        turn = recalled[cid]
        calls = by_turn.get(id(turn))
        if calls is None:
            calls = by_turn[id(turn)] = {}
            for remembered_call in turn["tool_calls"]:  # the first call of each id, as a search would find it
                if (key := call_id(remembered_call)) is not None:
                    calls.setdefault(key, remembered_call)
        remembered = calls.get(cid)
        if remembered is not None and KEY in remembered:
            call[KEY] = remembered[KEY]
            ctx.report(RULE, message, "restored", f"tool_calls[{number}] ({cid}) {KEY} restored from memory", position)
