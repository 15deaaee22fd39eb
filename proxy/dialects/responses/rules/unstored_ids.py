r"""Items a ``store: false`` request asks the server to look up (Codex, zero-data-retention accounts, the Agents
SDK without a store): nothing was persisted, so the lookup fails.

The server answers 404 (RS-7: "Items are not persisted when `store` is set to false"). Only an item that is
nothing without the store fails: an ``item_reference`` points at nothing, and a reasoning item without
``encrypted_content`` cannot be used, so both are dropped. An item that carries its whole content is taken
with its ``id`` (Codex sends its own ``msg_``/``fco_`` ids and the server's ``rs_``/``fc_`` ids on every item,
reasoning with its ``encrypted_content``), so it is left as sent. Answers RS-7.

Request:
    {"store": false}
Bad:
    {"role": "user", "content": "Weather?"}
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
    {"type": "item_reference", "id": "msg_1"}
Good:
    {"role": "user", "content": "Weather?"}
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
"""

from typing import Any

from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM407", "unstored-ids", ("RS-7",))


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
        else:
            kept.append(item)
    ctx.messages[:] = kept
