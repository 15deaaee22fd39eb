r"""Legacy function calling: ``function_call`` on an assistant and ``role: "function"`` results.

o-series models, newer Azure api-versions and closed-schema providers reject the legacy shape. The call
becomes a one-element ``tool_calls`` entry with a deterministic id, and the function message that answers
it becomes a ``tool`` message carrying that id; content is unchanged. Answers S11, OAI-11, AZ-3, MI-7.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "function_call": {"name": "weather", "arguments": "{}"}}
    {"role": "function", "name": "weather", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_f411e99e77e4e16cddc579f6", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "name": "weather", "content": "18C", "tool_call_id": "call_f411e99e77e4e16cddc579f6"}
"""

from proxy.repair.context import Context, stable_id
from proxy.repair.history import calls_of
from proxy.repair.rule import Rule

RULE = Rule("TM207", "legacy-function-call", ("S11", "OAI-11", "AZ-3", "MI-7"))


def apply(ctx: Context) -> None:
    awaiting: list[tuple[str | None, str]] = []  # (function name, id) of converted calls not yet answered
    for position, message in enumerate(ctx.messages):
        role = message.get("role")
        if role == "assistant" and "function_call" in message:
            legacy = message.pop("function_call")
            function = legacy if type(legacy) is dict else {}
            name = function.get("name")
            new_id = stable_id(position, name, function.get("arguments"))
            call = {"id": new_id, "type": "function", "function": dict(function)}
            message["tool_calls"] = [*calls_of(message), call]
            awaiting.append((name, new_id))
            ctx.report(RULE, message, "converted", f"function_call {name!r} -> tool_calls id {new_id}", position)
        elif role == "function":
            new_id = _answered_id(awaiting, message.get("name"), position)
            message["role"] = "tool"
            message["tool_call_id"] = new_id
            ctx.report(RULE, message, "converted", f"role 'function' -> 'tool' answering {new_id}", position)


def _answered_id(awaiting: list[tuple[str | None, str]], name: object, position: int) -> str:
    """The converted call this function message answers: the first awaiting one with its name, else the
    first awaiting one, else a fresh id (the orphan rule then decides what to do with it)."""
    for entry in awaiting:
        if entry[0] == name:
            awaiting.remove(entry)
            return entry[1]
    if awaiting:
        return awaiting.pop(0)[1]
    return stable_id(position, name)
