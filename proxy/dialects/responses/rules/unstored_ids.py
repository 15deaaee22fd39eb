r"""Server item ids in a ``store: false`` request (Codex, zero-data-retention accounts, the Agents SDK without a
store): nothing was persisted, so every id is looked up in vain.

The server answers 404 (RS-7: "Items are not persisted when `store` is set to false"; Azure likewise, RS-19).
Every input item loses its ``id`` (reasoning keeps its ``encrypted_content``, which is self-contained), but for a
``local_shell_call_output`` whose ``id`` names the call it answers (``items.id_pairs``); an
``item_reference`` points at nothing and a reasoning item without ``encrypted_content`` cannot be used, so
both are dropped. Answers RS-7, RS-19.

Request:
    {"store": false}
Bad:
    {"role": "user", "content": "Weather?"}
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"type": "reasoning", "summary": [], "encrypted_content": "gAAA1"}
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
"""

from typing import Any

from proxy.dialects.responses.items import id_pairs
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM407", "unstored-ids", ("RS-7", "RS-19"))


def unusable(item: Any) -> bool:
    """Under ``store: false``: an item that means nothing without the server's store."""
    kind = item.get("type") if type(item) is dict else None
    return kind == "item_reference" or (kind == "reasoning" and not item.get("encrypted_content"))


def apply(ctx: Context) -> None:
    if ctx.request.get("store") is not False:
        return
    kept = []
    for item in ctx.messages:
        if unusable(item):
            ctx.report(RULE, item, "removed", f"{item.get('type')} dropped: it needs the server's store, and store is false")
        elif type(item) is dict and "id" in item and not id_pairs(item):
            kept.append({name: value for name, value in item.items() if name != "id"})
            ctx.report(RULE, item, "removed", f"{item.get('type', 'message')} id deleted: store is false")
        else:
            kept.append(item)
    ctx.messages[:] = kept
