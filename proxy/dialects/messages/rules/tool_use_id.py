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

from proxy.dialects.messages.blocks import TOOL_USE_ID_PATTERN
from proxy.repair.context import Context, stable_id
from proxy.repair.history import call_id, each_call, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM501", "tool-use-id-pattern", ("AM-7",))

_REFUSED = re.compile(r"[^a-zA-Z0-9_-]")


def is_bad(value: str) -> bool:
    return not TOOL_USE_ID_PATTERN.fullmatch(value)  # ``$`` alone would let a final newline through


def apply(ctx: Context) -> None:
    taken = {cid for _, _, _, call in each_call(ctx.messages) if (cid := call_id(call)) is not None}
    taken |= {rid for m in ctx.messages if is_tool(m) and (rid := result_id(m)) is not None}
    renamed: dict[str, str] = {}
    for position, message, _, call in each_call(ctx.messages):
        cid = call_id(call)
        if cid is None or not is_bad(cid):
            continue
        new = _REFUSED.sub("_", cid)
        while new in taken:
            new = stable_id(cid, new, prefix=_REFUSED.sub("_", cid) + "_")
        taken.add(new)
        call["id"] = renamed[cid] = new
        ctx.report(RULE, message, "renamed", f"tool_use id {cid!r} -> {new}: only letters, digits, _ and - are accepted", position)
    for position, message in enumerate(ctx.messages):
        rid = result_id(message) if is_tool(message) else None
        if rid is not None and rid in renamed:
            message["tool_call_id"] = renamed[rid]
            ctx.report(RULE, message, "renamed", f"tool_result of {rid!r} -> {renamed[rid]}", position)
