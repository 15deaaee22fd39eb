r"""A ``tool_use`` id with characters Anthropic refuses: ``functions.Bash:0`` from Kimi, ``call|fc_1`` from a
Responses bridge, MCP or provider ids with dots, colons or slashes.

Anthropic wants ``^[a-zA-Z0-9_-]+$`` (AM-7: "String should match pattern"). Every other character becomes ``_``
in the ``tool_use`` and in its ``tool_result`` alike (the same rename, so the pair still matches); an id that is
taken already gets ``_`` and 24 hex digits of the original's SHA-256 added, so ids stay distinct and the same
history always gets the same ids. Runs over the view, after the orphan rule, so calls it synthesized are held to
the pattern too. Answers AM-7.

Bad:
    {"role": "user", "content": "List the files."}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "functions.Bash:0", "name": "Bash", "input": {"command": "ls"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "functions.Bash:0", "content": "README.md"}]}
Good:
    {"role": "user", "content": "List the files."}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "functions_Bash_0", "name": "Bash", "input": {"command": "ls"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "functions_Bash_0", "content": "README.md"}]}
"""

import re
from typing import Any

from proxy.dialects.ids import ID_CHARACTERS
from proxy.repair.context import Context, stable_id
from proxy.repair.history import Message, call_id, calls_of, is_assistant, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM501", "tool-use-id-pattern", ("AM-7",))

_REFUSED = re.compile(r"[^a-zA-Z0-9_-]")


def is_bad(value: str) -> bool:
    return not ID_CHARACTERS.fullmatch(value)  # Anthropic's blocks.TOOL_USE_ID_PATTERN, as the fast check tests it


def apply(ctx: Context) -> None:
    # One pass gathers every id declared or answered (taken), the calls with a refused id and the results.
    taken: set[str] = set()
    refused: list[tuple[int, Message, dict[str, Any]]] = []
    results: list[tuple[int, Message, str]] = []  # (position, tool entry, its id)
    for position, message in enumerate(ctx.messages):
        if is_assistant(message):
            for call in calls_of(message):
                if (cid := call_id(call)) is not None:
                    taken.add(cid)
                    if is_bad(cid):
                        refused.append((position, message, call))
        elif is_tool(message) and (rid := result_id(message)) is not None:
            taken.add(rid)
            results.append((position, message, rid))
    renamed: dict[str, str] = {}
    for position, message, call in refused:
        cid = call_id(call)  # again: a call met twice was renamed the first time
        if cid is None or not is_bad(cid):
            continue
        new = _REFUSED.sub("_", cid)
        while new in taken:
            new = stable_id(cid, new, prefix=_REFUSED.sub("_", cid) + "_")
        taken.add(new)
        call["id"] = renamed[cid] = new
        ctx.report(RULE, message, "renamed", f"tool_use id {cid!r} -> {new}: only letters, digits, _ and - are accepted", position)
    if not renamed:
        return
    for position, message, rid in results:  # this rule renames calls only: each id is as gathered
        if rid in renamed:
            message["tool_call_id"] = renamed[rid]
            ctx.report(RULE, message, "renamed", f"tool_result of {rid!r} -> {renamed[rid]}", position)
