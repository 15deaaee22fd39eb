r"""Calls of the previous response that a ``previous_response_id`` request does not answer (a parallel turn
answered in part, an interrupted tool).

The server holds those calls and refuses a continuation that leaves one unanswered (RS-1: "No tool output
found for function call ..."). For each, an output of the call's family saying plainly that nothing ran is
put at the start of the input, where the continuation's outputs belong; a result is never invented.
Answers RS-1, RS-2.

Request:
    {"previous_response_id": "resp_1"}
Bad:
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
Recalled:
    {"dialect": "responses", "ids": ["call_1", "call_2", "resp_1"], "response_id": "resp_1", "items": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"}, {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "time", "arguments": "{}"}]}
Good:
    {"type": "function_call_output", "call_id": "call_2", "output": "[toolmend] No result: this tool call was not executed or its result was lost."}
    {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
"""

from proxy.dialects.responses.items import call_id_of, is_call, is_output, output_type_for
from proxy.dialects.responses.rules.previous import previous_turn
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM402", "previous-response-unanswered", ("RS-1", "RS-2"))


def apply(ctx: Context) -> None:
    turn = previous_turn(ctx)
    if turn is None:
        return
    answered = {call_id_of(item) for item in ctx.messages if is_output(item)}
    missing = [item for item in turn.get("items", ()) if is_call(item) and (cid := call_id_of(item)) is not None and cid not in answered]
    placeholders = [{"type": output_type_for(item["type"]), "call_id": call_id_of(item), "output": ctx.policy.placeholder} for item in missing]
    for placeholder in placeholders:
        ctx.report(RULE, None, "inserted", f"placeholder output for {placeholder['call_id']} of previous response {turn.get('response_id')}")
    ctx.messages[:0] = placeholders
