r"""An item that carries its server ``id`` while the reasoning item it came with is gone (a handoff filter, a
session store that keeps only calls or messages, another model's history replayed to a reasoning model).

The server looks the ``fc_...`` (``ctc_...``, ``msg_...``) id up, finds it was made together with a reasoning
item, and refuses the input without it (RS-4: "... was provided without its required 'reasoning' item"; RS-5
for an assistant message). Memory tells which items had reasoning; such an item loses its ``id`` (never its
content), so the server takes it as client input. Answers RS-4, RS-5.

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

from proxy.dialects.responses.items import is_call, recall_key
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import Turn

RULE = Rule("TM405", "reasoning-required", ("RS-4", "RS-5"))


def _produced(item: Any) -> bool:
    """A call or an assistant message: what a response's reasoning item leads to."""
    return is_call(item) or (type(item) is dict and item.get("type", "message") == "message" and item.get("role") == "assistant")


def unreasoned(items: list[Any]) -> list[str]:
    """The recall key (``call_id``, or a message's id) of every item with a server id that no reasoning item
    precedes in its run: the reasoning items and what they produced (calls of one response stand together)."""
    keys = []
    reasoned = False  # a reasoning item stands in the current run
    for item in items:
        kind = item.get("type") if type(item) is dict else None
        if kind == "reasoning":
            reasoned = True
            continue
        if _produced(item) and not reasoned and "id" in item and (key := recall_key(item)) is not None:
            keys.append(key)
        if not is_call(item):
            reasoned = False  # a message ends the run; calls of one response follow each other
    return keys


def _had_reasoning(turn: Turn, item_id: Any) -> bool:
    before = False
    for item in turn.get("items", ()):
        if type(item) is not dict:
            continue
        if item.get("type") == "reasoning":
            before = True
        elif item.get("id") == item_id:
            return before
        elif not is_call(item):
            before = False
    return False


def apply(ctx: Context) -> None:
    lacking = set(unreasoned(ctx.messages))
    for position, item in enumerate(ctx.messages):
        key = recall_key(item) if _produced(item) else None
        turn = ctx.recalled.get(key) if key is not None and key in lacking else None
        if turn is not None and "id" in item and _had_reasoning(turn, item["id"]):
            ctx.messages[position] = {name: value for name, value in item.items() if name != "id"}
            ctx.report(RULE, item, "removed", f"{item.get('type', 'message')} {item['id']} ({key}) id deleted: its reasoning item is not in the input")
