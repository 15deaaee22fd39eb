r"""A history that opens with a function call content: a trimmed window whose first content held only responses,
whose call content the orphan rule (TM101) put back in front of them, or a client that trimmed before the user turn.

Gemini wants a call content right after a user turn or a function response turn (``Please ensure that function call
turn comes immediately after a user turn or after a function response turn.``, 400 ``INVALID_ARGUMENT``), and the
first content has none before it. A short user content (``OPENING_TEXT``, as TM308's) goes before it; the calls and
their responses stay as they are. Answers GN-3.

Bad:
    {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "weather", "response": {"temp": "18C"}}}]}
    {"role": "user", "parts": [{"text": "And tomorrow?"}]}
Good:
    {"role": "user", "parts": [{"text": "(earlier conversation omitted)"}]}
    {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"id": "c1", "name": "weather", "response": {"temp": "18C"}}}]}
    {"role": "user", "parts": [{"text": "And tomorrow?"}]}
"""

from typing import Any

from proxy.dialects.gemini.parts import MODEL, USER, function_call
from proxy.dialects.gemini.rules.edit import made_like, splice
from proxy.repair.content import OPENING_TEXT
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM611", "leading-call-content", ("GN-3",))


def opens_with_calls(contents: list[Any]) -> bool:
    """Whether the first content is a model content with a call part."""
    first = contents[0] if contents else None
    return (type(first) is dict and first.get("role") == MODEL and type(parts := first.get("parts")) is list
            and any(function_call(part) is not None for part in parts))


def apply(ctx: Context) -> None:
    if opens_with_calls(ctx.messages):
        first = ctx.messages[0]
        splice(ctx, [(0, [made_like(ctx, first, {"role": USER, "parts": [{"text": OPENING_TEXT}]}), first])])
        ctx.report(RULE, first, "inserted", "user content before the call content at the start of the history")
