r"""A reasoning item with nothing after it that it could have produced: at the end of the input, or followed
by a user message, a tool output or another reasoning item (a filter removed the call or message it led to, a store reordered items).

The server refuses it (RS-6: "... of type 'reasoning' was provided without its required following item").
Reasoning cannot be made up or completed, so the item is dropped; nothing the model said is lost, since
what it produced is gone already. Answers RS-6.

Bad:
    {"role": "user", "content": "Weather?"}
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}
    {"role": "user", "content": "Never mind."}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "user", "content": "Never mind."}
"""

from typing import Any

from proxy.dialects.responses.items import OUTPUT_TYPES
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM406", "dangling-reasoning", ("RS-6",))


#: Item types (besides outputs and messages) a reasoning item cannot have produced.
NOT_PRODUCED = ("item_reference", "reasoning")


def produced_by_model(item: Any) -> bool:
    """An item a reasoning item could have produced: a call, an assistant message, or any other item the model
    makes. Not an output, a client's message, a reference, nor another reasoning item: a reasoning item leads to
    what the model did next, so of two in a row the first has lost what it produced (dropping it is always
    safe; keeping it is refused)."""
    if type(item) is not dict:
        return False
    kind = item.get("type", "message")
    if type(kind) is not str:
        return True  # an item of no known type (a list, an object): not ours to judge, the reasoning stays
    return item.get("role") == "assistant" if kind == "message" else kind not in OUTPUT_TYPES and kind not in NOT_PRODUCED


def dangling(items: list[Any], position: int) -> bool:
    return position + 1 >= len(items) or not produced_by_model(items[position + 1])


def apply(ctx: Context) -> None:
    items = ctx.messages
    kept = []
    for position, item in enumerate(items):
        if type(item) is dict and item.get("type") == "reasoning" and dangling(items, position):
            ctx.report(RULE, item, "removed", f"reasoning {item.get('id', '')} dropped: no item it produced follows it".replace("  ", " "))
        else:
            kept.append(item)
    items[:] = kept
