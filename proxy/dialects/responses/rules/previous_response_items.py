r"""Items resent together with ``previous_response_id`` that the previous response already holds (a client that
both chains and replays its history).

The server keeps the previous response's items and refuses to see them twice (RS-9: "Duplicate item found
with id ..."). An input item that is one of the remembered previous response's items (its ``id``, of the same
type and ``call_id``) is dropped: the server already has it, exactly. An item that only shares the id (a copy
whose ``call_id`` TM107 renamed) is not what the server holds: it keeps its content and loses the id, as TM403
does. Answers RS-9.

It runs before the structural rules read the input (``plan.py``): what the server holds is no part of the
input, so an output of a dropped call is one the server answers for, and never gets a copy of its call or a
place right after it that the drop would leave empty.

Request:
    {"previous_response_id": "resp_1"}
Bad:
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
Recalled:
    {"dialect": "responses", "ids": ["call_1", "resp_1"], "response_id": "resp_1", "items": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}]}
Good:
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
"""

from typing import Any

from proxy.dialects.responses.rules.previous import previous_turn
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM401", "previous-response-items", ("RS-9",))


def apply(ctx: Context) -> None:
    turn = previous_turn(ctx)
    if turn is None:
        return
    held = {item["id"]: item for item in turn.get("items", ()) if type(item) is dict and type(item.get("id")) is str}
    kept = []
    for item in ctx.messages:
        key = item.get("id") if type(item) is dict else None
        if type(key) is not str or key not in held:  # an id that is a list or an object is the server's to refuse
            kept.append(item)
        elif _same(item, held[key]):
            ctx.report(RULE, item, "removed", f"{item.get('type')} {key} is already in previous response {turn.get('response_id')}")
        else:
            copy = {name: value for name, value in item.items() if name != "id"}
            ctx.origin[id(copy)] = ctx.index_of(item)
            kept.append(copy)
            ctx.report(RULE, item, "renamed", f"{item.get('type')} reuses id {key} of previous response {turn.get('response_id')}: "
                                              "its id deleted, its content kept")
    ctx.messages[:] = kept


def _same(item: dict[str, Any], held: dict[str, Any]) -> bool:
    """Whether ``item`` is the held item resent: of its type and, for a call or an output, of its ``call_id``."""
    return item.get("type") == held.get("type") and item.get("call_id") == held.get("call_id")
