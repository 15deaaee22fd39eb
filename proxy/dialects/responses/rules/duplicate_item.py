r"""The same item twice in one input (a replayed block, a reasoning item copied by a session store).

The server refuses an input that carries one item id twice (RS-9: "Duplicate item found with id ...").
Of identical copies one is kept: the first, unless a later copy of a reasoning item stands where it leads to
what it produced and the first does not (a client that kept a reasoning item out of place, and the turn put
back from memory with its own copy); an item that only shares the id keeps its content and loses the id, so
nothing the client sent is lost. Answers RS-9.

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

from proxy.dialects.responses.items import id_pairs
from proxy.dialects.responses.rules.dangling_reasoning import dangling
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM403", "duplicate-item", ("RS-9",))


def apply(ctx: Context) -> None:
    items = ctx.messages
    keeper = _keepers(items)
    first: dict[str, Any] = {}
    kept = []
    for position, item in enumerate(items):
        key = item.get("id") if type(item) is dict else None
        if type(key) is not str:
            kept.append(item)
        elif item == items[keeper.get(key, position)] and keeper.get(key, position) != position:
            ctx.report(RULE, item, "removed", f"a copy of {item.get('type')} {key} dropped")
        elif key in first and item != first[key] and not id_pairs(item):
            kept.append({name: value for name, value in item.items() if name != "id"})
            ctx.report(RULE, item, "renamed", f"{item.get('type')} reuses id {key}: its id deleted, its content kept")
        else:
            first.setdefault(key, item)
            kept.append(item)
    items[:] = kept


def _keepers(items: list[Any]) -> dict[str, int]:
    """For each id with identical copies, the position of the copy to keep: the first, or for a reasoning item
    the first copy followed by something it could have produced."""
    keeper: dict[str, int] = {}
    for position, item in enumerate(items):
        key = item.get("id") if type(item) is dict else None
        if type(key) is not str:
            continue
        if key not in keeper or (item == items[keeper[key]] and item.get("type") == "reasoning" and dangling(items, keeper[key])
              and not dangling(items, position)):
            keeper[key] = position
    return keeper
