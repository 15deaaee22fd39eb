r"""A call that carries its server ``id`` while the reasoning item it came with is gone (a handoff filter, a
session store that keeps only calls, another model's history replayed to a reasoning model).

The server looks the ``fc_...`` id up, finds it was made together with a reasoning item, and refuses the
input without it (RS-4: "... was provided without its required 'reasoning' item"). Memory tells which calls
had reasoning; such a call loses its ``id`` (never its content), so the server takes it as client input.
Answers RS-4.

Bad:
    {"role": "user", "content": "Weather?"}
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
Recalled:
    {"dialect": "responses", "ids": ["call_1", "resp_1"], "response_id": "resp_1", "items": [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA1"}, {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}]}
Good:
    {"role": "user", "content": "Weather?"}
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
"""

from typing import Any

from proxy.dialects.responses.items import call_id_of
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import Turn

RULE = Rule("TM405", "reasoning-required", ("RS-4",))


def unreasoned_calls(items: list[Any]) -> list[str]:
    """``call_id`` of every ``function_call`` with a server id and no reasoning item in the run of items before it."""
    ids = []
    reasoned = False  # a reasoning item stands in the current run of reasoning and call items
    for item in items:
        kind = item.get("type") if type(item) is dict else None
        if kind == "reasoning":
            reasoned = True
        elif kind == "function_call":
            if not reasoned and "id" in item and (cid := call_id_of(item)) is not None:
                ids.append(cid)
        else:
            reasoned = False
    return ids


def _had_reasoning(turn: Turn, item_id: Any) -> bool:
    before = False
    for item in turn.get("items", ()):
        if type(item) is not dict:
            continue
        if item.get("type") == "reasoning":
            before = True
        elif item.get("id") == item_id:
            return before
        elif item.get("type") not in ("function_call", "custom_tool_call"):
            before = False
    return False


def apply(ctx: Context) -> None:
    lacking = set(unreasoned_calls(ctx.messages))
    for position, item in enumerate(ctx.messages):
        cid = call_id_of(item) if type(item) is dict and item.get("type") == "function_call" else None
        turn = ctx.recalled.get(cid) if cid in lacking and cid is not None else None
        if turn is not None and "id" in item and _had_reasoning(turn, item["id"]):
            ctx.messages[position] = {name: value for name, value in item.items() if name != "id"}
            ctx.report(RULE, item, "removed", f"function_call {item['id']} ({cid}) id deleted: its reasoning item is not in the input")
