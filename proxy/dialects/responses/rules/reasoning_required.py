r"""An item that carries its server ``id`` while the reasoning item it came with is gone (a handoff filter, a
session store that keeps only calls or messages, another model's history replayed to a reasoning model).

The server looks the ``fc_...`` (``ctc_...``, ``msg_...``) id up, finds it was made together with a reasoning
item, and refuses the input without it (RS-4: "... was provided without its required 'reasoning' item"; RS-5
for an assistant message). Memory tells which reasoning item each came with; when that very item is not in the
input (another response's reasoning before it does not count), the item loses its ``id`` (never its content),
so the server takes it as client input. Answers RS-4, RS-5.

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


def _own_reasoning(turn: Turn) -> dict[Any, dict[str, Any] | None]:
    """For each item id of the remembered response (the first item of an id), the reasoning item it had right
    before it (calls of one run share it), or None: read once per response, not once per item that asks."""
    own: dict[Any, dict[str, Any] | None] = {}
    reasoning: dict[str, Any] | None = None
    for item in turn.get("items", ()):
        if type(item) is not dict:
            continue
        if item.get("type") == "reasoning":
            reasoning = item
            continue
        if type(key := item.get("id")) is str or key is None:
            own.setdefault(key, reasoning)
        if not is_call(item):
            reasoning = None
    return own


def _marks(item: dict[str, Any]) -> set[str]:
    """What identifies a reasoning item in an input: its id, and its encrypted content (``store: false`` has no ids)."""
    return {value for value in (item.get("id"), item.get("encrypted_content")) if type(value) is str and value}


def apply(ctx: Context) -> None:
    present: set[str] = set()  # the marks of the reasoning items before the current item
    read: dict[int, dict[Any, dict[str, Any] | None]] = {}  # identity of a remembered response -> _own_reasoning
    for position, item in enumerate(ctx.messages):
        if type(item) is dict and item.get("type") == "reasoning":
            present |= _marks(item)
            continue
        key = recall_key(item) if _produced(item) and "id" in item else None
        turn = ctx.recalled.get(key) if key is not None else None
        own = None
        if turn is not None and (type(item_id := item["id"]) is str or item_id is None):
            if (by_id := read.get(id(turn))) is None:
                by_id = read[id(turn)] = _own_reasoning(turn)
            own = by_id.get(item_id)
        if own is not None and not _marks(own) & present:
            ctx.messages[position] = {name: value for name, value in item.items() if name != "id"}
            ctx.report(RULE, item, "removed", f"{item.get('type', 'message')} {item['id']} ({key}) id deleted: its reasoning item is not in the input")
