r"""A reasoning item with nothing after it that it could have produced: at the end of the input, or followed
by a user message or a tool output (a filter removed the call or message it led to, a store reordered items).

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

from proxy.dialects.responses.items import is_output
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM406", "dangling-reasoning", ("RS-6",))


def produced_by_model(item: Any) -> bool:
    """An item the model could have produced after a reasoning item: a call, an assistant message, more reasoning."""
    if type(item) is not dict or is_output(item):
        return False
    kind = item.get("type", "message")
    return item.get("role") == "assistant" if kind == "message" else kind != "item_reference"


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
