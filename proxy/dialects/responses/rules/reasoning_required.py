r"""An item that carries its server ``id`` while the reasoning item it came with is gone (a handoff filter, a
session store that keeps only calls or messages, another model's history replayed to a reasoning model).

The server looks the ``fc_...`` (``ctc_...``, ``msg_...``) id up, finds it was made together with a reasoning
item, and refuses the input without it (RS-4: "... was provided without its required 'reasoning' item"; RS-5
for an assistant message). Memory tells which reasoning item each came with; when that very item is not in the
input (another response's reasoning before it does not count), the item loses its ``id`` (never its content),
so the server takes it as client input. Everything one reasoning item produced in an output needs it, across
messages: reasoning, a message, then calls, resent without the reasoning, lose the ids of the message and the calls.
An ``item_reference`` to such a message (Mastra's memory replays references) is replaced by the message memory holds,
without its id. Under ``store: false`` reasoning without ``encrypted_content`` (TM407 drops it) does not count as
there. Answers RS-4, RS-5.

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

import orjson

from proxy.dialects.responses.items import is_call, recall_key
from proxy.dialects.responses.rules.dangling_reasoning import produced_by_model
from proxy.dialects.responses.rules.unstored_ids import unusable
from proxy.dialects.responses.view import marks
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import Turn

RULE = Rule("TM405", "reasoning-required", ("RS-4", "RS-5"))


def _produced(item: Any) -> bool:
    """A call or an assistant message: what a response's reasoning item leads to."""
    return is_call(item) or (type(item) is dict and item.get("type", "message") == "message" and item.get("role") == "assistant")


def reasonings(turn: Turn) -> dict[Any, dict[str, Any] | None]:
    """For each item id of the remembered response (the first item of an id), the reasoning item it was made with: the
    latest reasoning item before it in one output, or None. Everything a reasoning item produced needs it, across
    messages (an answer of reasoning, a message and calls: the calls need it too); only an item the model did not
    produce (an output, a client's message, in an input as sent) ends what it produced. Read once per response."""
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
        if not produced_by_model(item):
            reasoning = None
    return own


def _referenced(item: Any) -> str | None:
    """The id an ``item_reference`` names (a message's is what memory recalls it by), else None."""
    if type(item) is not dict or item.get("type") != "item_reference":
        return None
    key = item.get("id")
    return key if type(key) is str and key else None


def apply(ctx: Context) -> None:
    present: set[str] = set()  # the marks of the reasoning items before the current item, and every referenced id
    unstored = ctx.request.get("store") is False
    read: dict[int, dict[Any, dict[str, Any] | None]] = {}  # identity of a remembered response -> its reasonings
    for position, item in enumerate(ctx.messages):
        if type(item) is dict and item.get("type") == "reasoning":
            if not (unstored and unusable(item)):  # what TM407 drops after this rule is not there for the server
                present |= marks(item)
            continue
        reference = _referenced(item)
        if reference is not None:
            present.add(reference)  # it may name reasoning
            _referenced_message(ctx, position, reference, present, read)
            continue
        key = recall_key(item) if _produced(item) and "id" in item else None
        turn = ctx.recalled.get(key) if key is not None else None
        own = None
        if turn is not None and (type(item_id := item["id"]) is str or item_id is None):
            own = reasonings_once(read, turn).get(item_id)
        if own is not None and not marks(own) & present:
            ctx.messages[position] = {name: value for name, value in item.items() if name != "id"}
            ctx.report(RULE, item, "removed", f"{item.get('type', 'message')} {item['id']} ({key}) id deleted: its reasoning item is not in the input")


def reasonings_once(read: dict[int, dict[Any, dict[str, Any] | None]], turn: Turn) -> dict[Any, dict[str, Any] | None]:
    """``reasonings(turn)``, read once per remembered response of one pass."""
    by_id = read.get(id(turn))
    if by_id is None:
        by_id = read[id(turn)] = reasonings(turn)
    return by_id


def _referenced_message(ctx: Context, position: int, key: str, present: set[str], read: dict[int, dict[Any, dict[str, Any] | None]]) -> None:
    """An ``item_reference`` to a remembered assistant message whose reasoning item is not in the input: the server
    would resolve it and refuse the message without its reasoning (RS-5), so the message memory holds, without its
    ``id``, stands in its place."""
    turn = ctx.recalled.get(key)
    if turn is None:
        return
    message = next((item for item in turn.get("items", ()) if type(item) is dict and item.get("id") == key), None)
    own = reasonings_once(read, turn).get(key)
    if message is None or own is None or marks(own) & present:
        return
    made = {name: value for name, value in message.items() if name != "id"}
    made = orjson.loads(orjson.dumps(made))  # never alias the memory
    ctx.origin[id(made)] = ctx.index_of(ctx.messages[position])
    ctx.report(RULE, ctx.messages[position], "replaced", f"item_reference {key} replaced by the remembered message without its id: its "
                                                       "reasoning item is not in the input")
    ctx.messages[position] = made
