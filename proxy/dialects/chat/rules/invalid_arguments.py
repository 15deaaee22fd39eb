r"""Call ``arguments`` that are not valid JSON: empty, or cut off at ``max_tokens``, or plain garbage.

vLLM, xAI and llama.cpp parse every replayed ``arguments`` and fail the whole request on one bad call.
``""`` becomes ``"{}"``; any other invalid text becomes a JSON object that carries the original text
under the key ``_toolmend_unparsed_arguments`` so nothing is lost. Valid JSON is never touched.
Answers S7, VL-1, VL-3, XA-2.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Par"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "error: bad arguments"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"_toolmend_unparsed_arguments\":\"{\\\"city\\\": \\\"Par\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "error: bad arguments"}
"""

import orjson

from proxy.repair.content import UNPARSED_KEY
from proxy.repair.context import Context
from proxy.repair.history import each_call
from proxy.repair.rule import Rule

RULE = Rule("TM203", "invalid-arguments", ("S7", "VL-1", "VL-3", "XA-2"))

def is_valid_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def apply(ctx: Context) -> None:
    for position, message, number, call in each_call(ctx.messages):
        function = call.get("function")
        if type(function) is not dict or type(function.get("arguments")) is not str:
            continue
        text = function["arguments"]
        if not text.strip():
            function["arguments"] = "{}"
            ctx.report(RULE, message, "replaced", f"tool_calls[{number}] ({call.get('id')}) empty arguments -> {{}}", position)
        elif not is_valid_json(text):
            function["arguments"] = orjson.dumps({UNPARSED_KEY: text}).decode()
            ctx.report(RULE, message, "wrapped", f"tool_calls[{number}] ({call.get('id')}) invalid JSON kept under {UNPARSED_KEY}", position)
