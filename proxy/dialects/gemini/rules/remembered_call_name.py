r"""A function call sent back with an empty ``name``: a stream that split parallel calls across chunks (the name in
one, the arguments in the next) and a client that merged them wrongly, a bridge that lost the name.

Gemini refuses it (``* GenerateContentRequest.contents[1].parts[0].function_call.name: Name cannot be empty.``, 400
``INVALID_ARGUMENT``), and the request holds nothing the name could be taken from: its response may carry a made-up
one. The call takes the name of the call the model gave under its ``id``, from the proxy's memory of the model's
answer; its response then takes that name from it (TM606). A call without an ``id``, or one memory does not hold,
keeps its empty name (a name is never made up), and the upstream's refusal goes to the client. Answers GN-7.

Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "", "response": {"temp": "18C"}}}]}
Recalled:
    {"dialect": "gemini", "ids": ["c1", "gemini-call:bbb97bf00a54e97e6fa48cc8764b40a3"], "parts": [{"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "weather", "response": {"temp": "18C"}}}]}
"""

from typing import Any

from proxy.dialects.gemini.parts import CALL, function_call, id_of, name_of, parts_of
from proxy.dialects.gemini.rules.edit import copy, pending
from proxy.repair.context import Context
from proxy.repair.findings import shown
from proxy.repair.rule import Rule
from proxy.turns import Turn, dialect_of

RULE = Rule("TM613", "remembered-call-name", ("GN-7",))


def nameless(call: dict[str, Any]) -> str | None:
    """The id a call without a name is recalled by; None for a named call, or one without an id."""
    return id_of(call) if name_of(call) is None else None


def remembered_name(turn: Turn | None, key: str) -> str | None:
    """The name of the call ``key`` in a remembered Gemini turn; None when it holds no named call of that id."""
    if turn is None or dialect_of(turn) != "gemini":
        return None
    return next((name for part in turn.get("parts", ()) if (call := function_call(part)) is not None and id_of(call) == key
                 and (name := name_of(call)) is not None), None)


def apply(ctx: Context) -> None:
    if not ctx.recalled:
        return
    contents = ctx.messages
    for position in pending(ctx):
        content = contents[position]
        parts = parts_of(content)
        if parts is None:
            continue
        named: list[Any] | None = None
        for number, part in enumerate(parts):
            call = function_call(part)
            key = nameless(call) if call is not None else None
            name = remembered_name(ctx.recalled.get(key), key) if key is not None else None
            if call is None or key is None or name is None:
                continue
            if named is None:
                named = list(parts)
            named[number] = {**part, CALL: {**call, "name": name}}
            ctx.report(RULE, content, "renamed", f"call {shown(key)!r}: empty name -> {shown(name)!r} (remembered)", position)
        if named is not None:
            contents[position] = copy(ctx, content, parts=named)
