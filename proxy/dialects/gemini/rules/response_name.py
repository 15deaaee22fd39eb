r"""A function response whose ``name`` is empty or is not its call's: an OpenAI bridge that fills it from the call
id or with ``unknown``, a stream whose name came in another chunk.

Gemini refuses an empty name (``* GenerateContentRequest.contents[2].parts[0].function_response.name: Name cannot
be empty.``) and a name that answers no call (``Request contains an invalid argument.``, 400 ``INVALID_ARGUMENT``).
The response takes the name of the call it answers: by id, else by position among the calls of the content before
it. Answers GN-7.

Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "", "response": {"temp": "18C"}}}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
"""

from typing import Any

from proxy.dialects.gemini.parts import RESPONSE
from proxy.dialects.gemini.view import NATIVE
from proxy.repair.context import Context
from proxy.repair.findings import shown
from proxy.repair.history import Message
from proxy.repair.rule import Rule

RULE = Rule("TM606", "response-name", ("GN-7",))


def apply(ctx: Context) -> None:
    """Over the view, once the structural rules paired every response with a call: a ``tool`` entry read from a
    response part gets its call's name under ``name`` (the view writes it into a copy of the part); one the rules made
    up gets its call's name as the call has it (the view writes it into the response it makes; no finding: the rule
    that made it up reported it)."""
    as_called: dict[str, Any] = {}  # each call's name as the latest call of its id has it
    read: list[tuple[int, Message, dict[str, Any]]] = []  # the tool entries read from a response part
    made: list[Message] = []  # the tool entries the rules made up
    for position, entry in enumerate(ctx.messages):  # one pass: every call's name, and the responses to judge after
        role = entry.get("role")
        if role == "assistant":
            calls = entry.get("tool_calls")
            for call in calls if type(calls) is list else ():
                if type(call) is dict:
                    as_called[call["id"]] = call["function"].get("name")
        elif role == "tool":
            if (native := entry.get(NATIVE)) is not None:
                read.append((position, entry, native))
            else:
                made.append(entry)
    named: dict[str, str] | None = None  # each call's latest name that is a non-empty string, made when first needed
    for position, entry, native in read:
        called = as_called.get(key := entry.get("tool_call_id"))  # type: ignore[arg-type]
        if type(called) is not str or not called:  # rare: no call, or the latest of its id has no name
            if key not in as_called:
                continue
            if named is None:
                named = _named(ctx.messages)
            called = named.get(key)
            if called is None:
                continue
        sent = native[RESPONSE].get("name")
        if sent != called:
            entry["name"] = called
            ctx.report(RULE, entry, "renamed", f"response name {shown(sent) if type(sent) is str else type(sent).__name__!r} -> {shown(called)!r}",
                       position)
    for entry in made:
        entry["name"] = as_called.get(entry.get("tool_call_id"))  # type: ignore[arg-type]


def _named(entries: list[Message]) -> dict[str, str]:
    """Each call's latest name that is a non-empty string, by the call's id (a response takes its call's name, unless
    the latest call of its id has none)."""
    names: dict[str, str] = {}
    for entry in entries:
        calls = entry.get("tool_calls") if entry.get("role") == "assistant" else None
        for call in calls if type(calls) is list else ():
            if type(call) is dict and type(name := call["function"].get("name")) is str and name:
                names[call["id"]] = name
    return names
