r"""Call ``arguments`` sent as an object (or any non-string) instead of JSON text.

OpenAI rejects a dict where the string belongs; the value is serialized with a JSON encoder, and a null
becomes ``"{}"``. Answers S6, OAI-6.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

import orjson

from proxy.repair.context import Context
from proxy.repair.history import each_call
from proxy.repair.rule import Rule

RULE = Rule("TM202", "object-arguments", ("S6", "OAI-6"))


def apply(ctx: Context) -> None:
    for position, message, number, call in each_call(ctx.messages):
        function = call.get("function")
        if type(function) is dict and type(function.get("arguments")) is not str:
            value = function.get("arguments")
            function["arguments"] = "{}" if value is None else orjson.dumps(value).decode()
            kind = "null" if value is None else type(value).__name__
            ctx.report(RULE, message, "serialized", f"tool_calls[{number}] ({call.get('id')}) arguments were {kind}", position)
