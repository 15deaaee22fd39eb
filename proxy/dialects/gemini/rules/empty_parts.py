r"""An empty text part (``{"text": ""}``), an empty part (``{}``), or a content left without parts: a bridge that
turns a tool-only answer's ``content: ""`` into a text part, a trimmed window.

Gemini refuses them (``* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.``; Vertex:
``Unable to submit request because it has an empty text parameter.``, 400 ``INVALID_ARGUMENT``). They are removed,
and a content left with no part with them. An empty text part that carries a ``thoughtSignature`` is kept: the
signature is what it carries (the model puts one there after its last part). Answers GN-10.

Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"text": ""}, {"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
    {"role": "model", "parts": [{"text": "It is 18C."}, {"text": "", "thoughtSignature": "c2lnbmF0dXJl"}]}
    {"role": "model", "parts": []}
    {"role": "user", "parts": [{"text": "Thanks."}, {}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
    {"role": "model", "parts": [{"text": "It is 18C."}, {"text": "", "thoughtSignature": "c2lnbmF0dXJl"}]}
    {"role": "user", "parts": [{"text": "Thanks."}]}
"""

from typing import Any

from proxy.dialects.gemini.rules.edit import copy, pending, splice
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM607", "empty-parts", ("GN-10",))

#: The keys an empty text part may have and still say nothing (no ``thoughtSignature``, no data).
_EMPTY_TEXT_KEYS = frozenset(("text", "thought"))


def is_empty(part: Any) -> bool:
    """A part that says nothing: ``{}``, or an empty text without a signature."""
    # ``"text" in part`` first: a part without text would compare None with "", Python's slow comparison path.
    return type(part) is dict and (not part or ("text" in part and part["text"] == "" and part.keys() <= _EMPTY_TEXT_KEYS))


def without_parts(content: Any) -> bool:
    """A content whose ``parts`` are missing or an empty list."""
    return type(content) is dict and ("parts" not in content or content["parts"] == [])


def apply(ctx: Context) -> None:
    contents = ctx.messages
    gone: list[int] = []
    for position in pending(ctx):
        content = contents[position]
        if without_parts(content):
            ctx.report(RULE, content, "removed", "content without parts removed", position)
            gone.append(position)
            continue
        parts = content.get("parts") if type(content) is dict else None
        if type(parts) is not list or not any(map(is_empty, parts)):
            continue
        left = [part for part in parts if not is_empty(part)]
        removed = len(parts) - len(left)
        if left:
            ctx.report(RULE, content, "removed", f"{removed} empty part(s) removed", position)
            contents[position] = copy(ctx, content, parts=left)
            continue
        ctx.report(RULE, content, "removed", f"content of {removed} empty part(s) removed", position)
        gone.append(position)
    splice(ctx, [(position, []) for position in gone])
