r"""The same item twice in one input (a replayed block, a reasoning item copied by a session store).

The server refuses an input that carries one item id twice (RS-9: "Duplicate item found with id ...").
A later copy identical to the first is dropped; a later item that only shares the id keeps its content and
loses the id, so nothing the client sent is lost. Answers RS-9.

Bad:
    {"role": "user", "content": "Weather?"}
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
"""

from typing import Any

from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM403", "duplicate-item", ("RS-9",))


def apply(ctx: Context) -> None:
    first: dict[str, Any] = {}
    kept = []
    for item in ctx.messages:
        key = item.get("id") if type(item) is dict else None
        if type(key) is not str:
            kept.append(item)
        elif key not in first:
            first[key] = item
            kept.append(item)
        elif item == first[key]:
            ctx.report(RULE, item, "removed", f"second copy of {item.get('type')} {key} dropped")
        else:
            kept.append({name: value for name, value in item.items() if name != "id"})
            ctx.report(RULE, item, "renamed", f"{item.get('type')} reuses id {key}: its id deleted, its content kept")
    ctx.messages[:] = kept
