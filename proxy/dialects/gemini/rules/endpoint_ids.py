r"""``functionCall.id`` and ``functionResponse.id`` sent to an endpoint that refuses them: Vertex AI before Gemini 3
(an OpenAI bridge forwards its call ids; a history first sent to the Developer API, which documents ids).

Vertex answers ``Invalid JSON payload received. Unknown name "id" at 'contents[1].parts[0].function_call': Cannot
find field.`` (400 ``INVALID_ARGUMENT``). The ids are removed there; Gemini pairs responses with calls by position.
The Developer API, and Vertex from Gemini 3 on, take them: they are kept. The request's target (endpoint family and
model) decides. Answers GN-9.

Request:
    {"family": "vertex", "model": "projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro"}
Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"id": "call_1", "name": "weather", "response": {"temp": "18C"}}}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
"""

from typing import Any

from proxy.dialects.gemini.parts import CALL, RESPONSE
from proxy.dialects.gemini.rules.edit import copy, pending, target_of
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM608", "endpoint-ids", ("GN-9",))


def has_id(part: Any) -> bool:
    """A call or response part whose object carries an ``id``."""
    if type(part) is not dict:
        return False
    value = part.get(CALL, part.get(RESPONSE))
    return type(value) is dict and "id" in value


def _without_id(part: Any) -> Any:
    if not has_id(part):
        return part
    key = CALL if CALL in part else RESPONSE
    return {**part, key: {name: value for name, value in part[key].items() if name != "id"}}


def apply(ctx: Context) -> None:
    if target_of(ctx).takes_ids:
        return
    contents = ctx.messages
    for position in pending(ctx):
        content = contents[position]
        parts = content.get("parts") if type(content) is dict else None
        if type(parts) is not list or not any(map(has_id, parts)):
            continue
        removed = sum(map(has_id, parts))
        contents[position] = copy(ctx, content, parts=[_without_id(part) for part in parts])
        ctx.report(RULE, content, "removed", f"{removed} id(s) removed: the endpoint refuses them", position)
