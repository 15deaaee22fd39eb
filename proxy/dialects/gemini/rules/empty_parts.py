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

from proxy.dialects.gemini.rules.edit import copy
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM607", "empty-parts", ("GN-10",))

#: The keys an empty text part may have and still say nothing (no ``thoughtSignature``, no data).
_EMPTY_TEXT_KEYS = frozenset(("text", "thought"))


def is_empty(part: Any) -> bool:
    """A part that says nothing: ``{}``, or an empty text without a signature."""
    # ``"text" in part`` first: a part without text would compare None with "", Python's slow comparison path.
    return type(part) is dict and (not part or ("text" in part and part["text"] == "" and part.keys() <= _EMPTY_TEXT_KEYS))


#: What ``_state`` says of a content: kept as it is, holding an empty part, or without parts (missing or empty).
KEPT, EMPTY_PART, NO_PARTS = 0, 1, 2


def _state(content: Any) -> int:
    if type(content) is not dict:
        return KEPT
    parts = content.get("parts")
    if type(parts) is not list:
        return KEPT if "parts" in content else NO_PARTS
    if not parts:
        return NO_PARTS
    for part in parts:  # ``is_empty``, inlined: this looks at every part of every content
        if type(part) is dict and (not part or ("text" in part and part["text"] == "" and part.keys() <= _EMPTY_TEXT_KEYS)):
            return EMPTY_PART
    return KEPT


def apply(ctx: Context) -> None:
    contents = ctx.messages
    states = list(map(_state, contents))
    if not any(states):
        return
    kept: list[Any] = []
    for position, (content, state) in enumerate(zip(contents, states, strict=True)):
        if state == EMPTY_PART:
            parts = content["parts"]
            left = [part for part in parts if not is_empty(part)]
            removed = len(parts) - len(left)
            if left:
                ctx.report(RULE, content, "removed", f"{removed} empty part(s) removed", position)
                kept.append(copy(ctx, content, parts=left))
                continue
            ctx.report(RULE, content, "removed", f"content of {removed} empty part(s) removed", position)
            continue
        if state == NO_PARTS:
            ctx.report(RULE, content, "removed", "content without parts removed", position)
            continue
        kept.append(content)
    contents[:] = kept
