r"""An item ``id`` the server cannot have made: the wrong prefix for its type (``item_...``, ``call_...``, a UUID,
from gateways and client rewrites) or characters outside letters, digits, ``_`` and ``-``.

The server refuses it (RS-12: "Expected an ID that begins with 'fc'", RS-13). The id is deleted, not
rewritten: an item without ``id`` is fresh client input, which every server accepts, while a made-up
``fc_...`` would be looked up and not found. When it is a reasoning item's, the items it produced lose theirs
too: the server would look them up and miss the reasoning they were made with (RS-4, RS-5).
Answers RS-12, RS-13.

Bad:
    {"role": "user", "content": "Weather?"}
    {"type": "function_call", "id": "call_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
"""

from typing import Any

from proxy.dialects.ids import ID_CHARACTERS
from proxy.dialects.responses.items import id_pairs
from proxy.dialects.responses.rules import dangling_reasoning
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM404", "bad-item-id", ("RS-12", "RS-13"))

#: The prefix the server gives the ids of the item types it makes (RS-12); other types are not judged by prefix.
PREFIX = {"function_call": "fc", "reasoning": "rs", "custom_tool_call": "ctc", "compaction": "cmp"}


def expected_prefix(item: dict[str, Any]) -> str | None:
    kind = item.get("type", "message")
    if kind == "message":
        return "msg" if item.get("role") == "assistant" else None
    return PREFIX.get(kind) if type(kind) is str else None


def is_bad(item: Any) -> bool:
    """An item whose ``id`` is present but could not have come from the server."""
    if type(item) is not dict or "id" not in item or item.get("type") == "item_reference" or id_pairs(item):
        return False
    key = item["id"]
    if type(key) is not str or not ID_CHARACTERS.fullmatch(key):
        return True
    prefix = expected_prefix(item)
    return prefix is not None and not key.startswith(prefix + "_")


def apply(ctx: Context) -> None:
    # In the items a reasoning item whose id was deleted produced: everything the model made after it, across
    # messages, up to an item it did not make (an output, a client's message, another reasoning item).
    orphaned = False
    for position, item in enumerate(ctx.messages):
        kind = item.get("type", "message") if type(item) is dict else None
        if is_bad(item):
            ctx.messages[position] = {name: value for name, value in item.items() if name != "id"}
            ctx.report(RULE, item, "removed", f"{kind} id deleted: not an id the server makes for this type")
            orphaned = kind == "reasoning" or (orphaned and dangling_reasoning.produced_by_model(item))
        elif orphaned and type(item) is dict and "id" in item and dangling_reasoning.produced_by_model(item):
            ctx.messages[position] = {name: value for name, value in item.items() if name != "id"}
            ctx.report(RULE, item, "removed", f"{kind} {item['id']} id deleted: its reasoning item's id was")
        else:
            orphaned = orphaned and dangling_reasoning.produced_by_model(item)  # another reasoning item: its own production
