r"""Items resent together with ``previous_response_id`` that the previous response already holds (a client that
both chains and replays its history).

The server keeps the previous response's items and refuses to see them twice (RS-9: "Duplicate item found
with id ..."). An input item whose ``id`` is one of the remembered previous response's items is dropped:
the server already has it, exactly. Answers RS-9.

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

from proxy.dialects.responses.rules.previous import previous_turn
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM401", "previous-response-items", ("RS-9",))


def apply(ctx: Context) -> None:
    turn = previous_turn(ctx)
    if turn is None:
        return
    held = {item["id"] for item in turn.get("items", ()) if type(item) is dict and type(item.get("id")) is str}
    kept = []
    for item in ctx.messages:
        if type(item) is dict and item.get("id") in held:
            ctx.report(RULE, item, "removed", f"{item.get('type')} {item['id']} is already in previous response {turn.get('response_id')}")
        else:
            kept.append(item)
    ctx.messages[:] = kept
