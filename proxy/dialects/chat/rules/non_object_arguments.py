r"""Call ``arguments`` that are valid JSON but not an object (``"[1, 2]"``, ``"\"ls\""``), sent to vLLM or
SGLang: their chat templates iterate the arguments as a mapping and fail.

The text is kept under the key ``_toolmend_unparsed_arguments`` of a JSON object, as for invalid JSON
(TM203). Profile ``vllm``. Answers VL-2, S7.

Bad:
    {"role": "user", "content": "Sum"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "[1, 2]"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "3"}
Good:
    {"role": "user", "content": "Sum"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"_toolmend_unparsed_arguments\":\"[1, 2]\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "3"}
"""

from typing import Any

import orjson

from proxy.repair.content import UNPARSED_KEY
from proxy.repair.context import Context
from proxy.repair.history import each_call
from proxy.repair.rule import Rule

RULE = Rule("TM309", "non-object-arguments", ("VL-2", "S7"))


def _not_object(call: dict[str, Any]) -> bool:
    function = call.get("function")
    if type(function) is not dict or type(function.get("arguments")) is not str:
        return False
    try:
        return type(orjson.loads(function["arguments"])) is not dict
    except orjson.JSONDecodeError:
        return False  # invalid JSON is TM203's


def is_clean(messages: list[Any], profile: Any) -> bool:
    return not any(_not_object(call) for _, _, _, call in each_call(messages))


def apply(ctx: Context) -> None:
    for position, message, number, call in each_call(ctx.messages):
        if _not_object(call):
            call["function"]["arguments"] = orjson.dumps({UNPARSED_KEY: call["function"]["arguments"]}).decode()
            ctx.report(RULE, message, "wrapped", f"tool_calls[{number}] ({call.get('id')}) arguments kept under {UNPARSED_KEY}", position)
