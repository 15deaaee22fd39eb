r"""Item ids memory knows the server never issued here: a call whose ``id`` is not the one the server gave it (a
converter or gateway made up ``fc_...`` ids), and a reasoning item a converter fabricated in front of calls or a
message memory holds (a handoff that replays another model's turn to a reasoning model).

The server looks every input id up and answers 404 for one it never stored (RS-8: "Item with id '...' not found.").
Only where memory can tell is anything changed: a call remembered under its ``call_id`` with another server id loses
the made-up ``id`` (never its content); a reasoning item right before an item memory holds, which memory says was made
with no reasoning or with another one, and whose id no remembered turn holds, is dropped (reasoning is never made up,
so a fabricated one cannot be kept; what the real one produced then follows TM405). Memory is asked about calls
without reasoning before them on every request, about what follows reasoning only when the request is repaired
anyway (a valid-looking input is not made to wait for the store): the upstream's 404 answers the rest (TM409). An id
memory knows nothing of is left to the server, and so is every id of a ``store: false`` request, which the server
does not look up. Answers RS-8.

Bad:
    {"role": "user", "content": "Weather?"}
    {"type": "function_call", "id": "fc_made_up", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
Recalled:
    {"dialect": "responses", "ids": ["call_1", "resp_1"], "response_id": "resp_1", "items": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}]}
Good:
    {"role": "user", "content": "Weather?"}
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
"""

from typing import Any

from proxy.dialects.responses.items import call_id_of, is_call, recall_key
from proxy.dialects.responses.rules.reasoning_required import reasonings_once
from proxy.dialects.responses.view import is_reasoning
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import Turn

RULE = Rule("TM410", "unissued-ids", ("RS-8",))


class _Remembered:
    """What the rule asks of each remembered turn, read once per turn (not once per item that asks): the copy of an item
    (the call with its ``call_id``, the message with its id) and the reasoning each item id was made with."""

    def __init__(self) -> None:
        self.copies: dict[int, dict[tuple[Any, Any], dict[str, Any]]] = {}
        self.reasonings: dict[int, dict[Any, dict[str, Any] | None]] = {}

    def held(self, turn: Turn | None, item: dict[str, Any]) -> dict[str, Any] | None:
        """The remembered copy of ``item`` in ``turn`` (the first of its key and type)."""
        if turn is None:
            return None
        copies = self.copies.get(id(turn))
        if copies is None:
            copies = self.copies[id(turn)] = {}
            for kept in turn.get("items", ()):
                if type(kept) is dict:
                    copies.setdefault((recall_key(kept), kept.get("type", "message")), kept)
        return copies.get((recall_key(item), item.get("type", "message")))

    def own_reasoning(self, turn: Turn, item_id: Any) -> dict[str, Any] | None:
        return reasonings_once(self.reasonings, turn).get(item_id)


def _may_be_issued(item: dict[str, Any], following: Any, ctx: Context, known: set[str], remembered: _Remembered) -> bool:
    """Whether the reasoning ``item`` may be real: memory holds its id, or does not hold what follows it, or says that
    what follows was made with this very reasoning item."""
    if item["id"] in known or type(following) is not dict or "id" not in following:
        return True
    key = recall_key(following)
    turn = ctx.recalled.get(key) if key is not None else None
    held = remembered.held(turn, following)
    if turn is None or held is None or type(held.get("id")) is not str:
        return True
    own = remembered.own_reasoning(turn, held["id"])
    return own is not None and own.get("id") == item["id"]


def apply(ctx: Context) -> None:
    if not ctx.recalled or ctx.request.get("store") is False:
        return  # nothing to tell, or nothing looked up: under ``store: false`` the server reads items as sent
    turns = {id(turn): turn for turn in ctx.recalled.values()}.values()
    known = {value for turn in turns for kept in turn.get("items", ()) if type(kept) is dict and type(value := kept.get("id")) is str}
    items = ctx.messages
    kept: list[Any] = []
    remembered = _Remembered()
    for position, item in enumerate(items):
        if is_reasoning(item) and type(item.get("id")) is str:
            following = items[position + 1] if position + 1 < len(items) else None
            if not _may_be_issued(item, following, ctx, known, remembered):
                ctx.report(RULE, item, "removed", f"reasoning {item['id']} dropped: memory holds what follows it, made without it")
                continue
        elif is_call(item) and type(key := item.get("id")) is str:
            held = remembered.held(ctx.recalled.get(call_id_of(item) or ""), item)
            if held is not None and type(issued := held.get("id")) is str and issued != key:
                item = {name: value for name, value in items[position].items() if name != "id"}
                ctx.origin[id(item)] = ctx.index_of(items[position])
                ctx.report(RULE, items[position], "removed", f"{item.get('type')} id {key} deleted: the server issued {issued} for "
                                                             f"call {call_id_of(item)}")
        kept.append(item)
    items[:] = kept
