r"""Two tool messages answering the same call (a framework's placeholder next to the real result, a
retried tool, a replayed block).

Kimi, Mistral and LiteLLM's pre-flight check reject it. One result is kept: a real result wins over an
empty or placeholder one; identical results keep the first; two different real results are merged into
the first, joined by a blank line, so neither is lost. Answers S5, MI-3, KI-3, AM-5.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "[toolmend] No result: this tool call was not executed or its result was lost."}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

from typing import Any

from proxy.repair.content import as_parts, as_text, is_media_part, part_text
from proxy.repair.context import Context
from proxy.repair.findings import shown
from proxy.repair.history import Message, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM108", "duplicate-tool-result", ("S5", "MI-3", "KI-3", "AM-5"))


def apply(ctx: Context) -> None:
    messages = ctx.messages
    results = ctx.pairing().results
    if len({read for _, read, _ in results}) == len(results):
        return  # no id answered twice: told by one set, as most histories are
    first: dict[str, Message] = {}
    start = 0  # where the first repeated result stands (there is one): the rule's work starts there
    for at, read, _ in results:  # the results before it, each the first of its id
        if read in first:
            start = at
            break
        first[read] = messages[at]
    # The history is copied without the repeated results, not edited by ``del``: each deletion would move every later
    # message, and a long run of repeated results became quadratic.
    kept = messages[:start]
    merged: dict[str, _Merged] = {}
    for message in messages[start:]:
        rid = result_id(message) if is_tool(message) else None
        if rid is None or rid not in first:
            if rid is not None:
                first[rid] = message
            kept.append(message)
            continue
        into = merged.get(rid)
        if into is None:
            into = merged[rid] = _Merged(first[rid], ctx.policy.placeholder)
        action = into.add(message.get("content"))
        ctx.report(RULE, message, "removed", f"second result of {shown(rid)}: {action}", len(kept))
    for into in merged.values():
        into.write()
    messages[:] = kept


class _Merged:
    """The first result of a call and what its later results make of it, one at a time: a placeholder gives way to a
    real result, an equal text is dropped, a different one is joined to it by a blank line (as parts, where either
    has media). The content is written once, at the end; until then a joined text is kept as its pieces and its
    length, and joined only to be compared with a result of that very length (which pays for the join): joining
    the whole text again for each result made a long run of them quadratic."""

    def __init__(self, message: Message, placeholder: str) -> None:
        self.message = message
        self.placeholder = placeholder
        self.content: Any = message.get("content")  # until something is joined to it
        self.replaced = False  # ``content`` is a later result's, which replaced a placeholder
        self.pieces: list[Any] | None = None  # once something is joined: texts (blank line between) or ``parts``
        self.parts = False
        self.media = False  # whether ``pieces`` holds media (they are parts then)
        self.length = 0  # of the joined content as text (``as_text``)
        self.text: str | None = None  # the content as text, once made

    def add(self, content: Any) -> str:
        """Fold a later result's ``content`` in; what was done."""
        if self._is_placeholder() and not _is_placeholder(content, self.placeholder):
            self.content, self.replaced, self.pieces, self.parts, self.text = content, True, None, False, None
            return "replaced placeholder with the real result"
        if _is_placeholder(content, self.placeholder):
            return "removed duplicate"
        text = as_text(content)
        if len(text) == self._length() and text == self._as_text():
            return "removed duplicate"
        if self._has_media() or _has_media(content):  # keep media as parts: TM206 moves them to a user message
            self._join_parts(as_parts(content))
        else:
            self._join_text(text)
        return "merged two different results"

    def write(self) -> None:
        if self.pieces is not None:
            self.message["content"] = self.pieces if self.parts else self._as_text()
        elif self.replaced:
            self.message["content"] = self.content

    def _is_placeholder(self) -> bool:
        if self.pieces is None:
            return _is_placeholder(self.content, self.placeholder)
        return not self.parts and self.length == len(self.placeholder) and self._as_text() == self.placeholder

    def _has_media(self) -> bool:
        return self.media if self.pieces is not None else _has_media(self.content)

    def _length(self) -> int:
        return len(self._as_text()) if self.pieces is None else self.length

    def _as_text(self) -> str:
        if self.text is None:
            if self.pieces is None:
                self.text = as_text(self.content)
            elif self.parts:
                self.text = as_text(self.pieces)
            else:
                self.text = "\n\n".join(self.pieces)
                self.pieces = [self.text]
        return self.text

    def _join_text(self, text: str) -> None:
        if self.pieces is None:
            self.pieces = [self._as_text()]
            self.length = len(self.pieces[0])
        self.pieces.append(text)
        self.length += 2 + len(text)
        self.text = None

    def _join_parts(self, parts: list[Any]) -> None:
        if self.pieces is None or not self.parts:
            # a copy: the client's list is shared with the request as sent, and only ever replaced
            self.pieces = list(as_parts(self.content if self.pieces is None else self._as_text()))
            self.parts = True
            self.media = any(is_media_part(part) for part in self.pieces)
            self.length = _text_length(self.pieces)
        if self.pieces and parts:
            self.length += 1
        self.pieces += parts
        self.length += _text_length(parts)
        self.media = self.media or any(is_media_part(part) for part in parts)
        self.text = None


def _text_length(parts: list[Any]) -> int:
    """``len(as_text(parts))``, without making the text."""
    return sum(len(part_text(part)) for part in parts) + max(len(parts) - 1, 0)


def _has_media(content: Any) -> bool:
    return type(content) is list and any(is_media_part(part) for part in content)


def _is_placeholder(content: Any, placeholder: str) -> bool:
    return content is None or content == "" or content == placeholder
