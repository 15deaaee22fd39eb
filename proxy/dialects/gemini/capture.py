"""Read Gemini's answers (``generateContent``, ``streamGenerateContent``) into remembered turns.

A Gemini history breaks when a client drops a ``model`` content whose ``functionCall`` parts its ``functionResponse``
parts still answer (GN-1, GN-2), or drops the ``thoughtSignature`` a Gemini 3 call must come back with (GN-11). Both
are mended from memory only, so every answer's ``model`` content that calls a function is remembered whole: one
:class:`~proxy.turns.Turn` per candidate, every part in order as the upstream sent it (the ``thoughtSignature`` on the
part it came on, thought parts, text, ids where the API gives them), keyed by ``keys.turn_ids``.

* :func:`turns_from_json` reads a ``GenerateContentResponse``; its parts are kept exactly as parsed.
* :class:`GeminiStream` reads ``streamGenerateContent`` as the relay passes its chunks on, in either shape: server-sent
  events (``?alt=sse``: each ``data:`` a whole ``GenerateContentResponse``, no terminal event) or, without
  ``alt=sse``, one JSON array of them, split into its elements as the bytes arrive (never read whole). Each chunk's
  parts continue the candidate's content: adjacent text deltas of one kind (thought or not) join into one part, the
  signature a later chunk sends joins the text it ends, and a call split across chunks (its name in one, its
  ``args`` in the next, GN-7) is one part again, as the final content has them.

Nothing here raises on bad input; what one answer keeps is bounded by ``proxy.dialects.capture`` (MAX_ENTRIES parts
in all, their depth and values), and a stream by ``max_bytes``.
"""

from __future__ import annotations

import re
from typing import Any

from proxy.dialects.capture import MAX_ENTRIES, MAX_TURNS, Budget, Cut, Readers, bounded, read_answer
from proxy.dialects.gemini.keys import turn_ids
from proxy.dialects.sse import BOM, EventStreamReader
from proxy.turns import Turn

__all__ = ["CAPTURE", "GeminiStream", "turns_from_json"]

#: The keys of a text part that may join the text before it: its text, whether it is a thought, a signature.
TEXT_KEYS = frozenset(("text", "thought", "thoughtSignature"))
#: Outside a JSON string, the bytes that open or close a value or a string; inside one, its end or an escape.
OUTSIDE_STRING = re.compile(rb'[\[\]{}"]')
INSIDE_STRING = re.compile(rb'["\\]')
WHITESPACE = b" \t\r\n"


def _is_part(part: dict[str, Any]) -> bool:
    """Every object of ``parts`` is a part: one the API adds later is kept too, as sent."""
    return True


def _turn(parts: list[dict[str, Any]]) -> Turn | None:
    """The turn of one model content's parts, or None when no part calls a function (nothing to put back)."""
    ids = turn_ids(parts)
    return {"dialect": "gemini", "ids": ids, "parts": parts} if ids else None


def _contents(answer: Any) -> list[tuple[int, list[Any]]]:
    """The ``(index, parts)`` of each candidate's ``model`` content in a ``GenerateContentResponse``."""
    candidates = answer.get("candidates") if type(answer) is dict else None
    if type(candidates) is not list:
        return []
    found = []
    for position, candidate in enumerate(candidates if len(candidates) <= MAX_TURNS else candidates[:MAX_TURNS]):
        content = candidate.get("content") if type(candidate) is dict else None
        if type(content) is not dict or type(parts := content.get("parts")) is not list or content.get("role", "model") != "model":
            continue
        index = candidate.get("index")
        found.append((index if type(index) is int else position, parts))
    return found


def turns_from_json(body: bytes | bytearray | memoryview | str, cut: Cut | None = None) -> list[Turn]:
    """The turns of a ``GenerateContentResponse`` body, one per candidate that calls a function, in candidate order;
    what they leave out counted in ``cut``. Never raises."""
    cut = Cut() if cut is None else cut
    try:
        budget = Budget()
        turns = []
        for _, parts in sorted(_contents(read_answer(body, cut)), key=lambda pair: pair[0]):
            turn = _turn(bounded(parts, _is_part, cut, budget))
            if turn is not None:
                turns.append(turn)
        return turns
    except Exception:  # noqa: BLE001 - remembering is best effort: an answer toolmend cannot read is relayed unremembered
        return []


def _joins_text(part: dict[str, Any]) -> bool:
    return type(part.get("text")) is str and part.keys() <= TEXT_KEYS


def _call_name(part: dict[str, Any]) -> Any:
    call = part.get("functionCall")
    return call.get("name") if type(call) is dict else None


class _Content:
    """One candidate's content as its chunks arrive: its parts so far, the last one's text as pieces (joined once)."""

    __slots__ = ("parts", "pieces")

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.pieces: list[str] | None = None  # the last part's text, while more deltas may join it

    def add(self, part: dict[str, Any]) -> bool:
        """Continue the content with a streamed ``part``; whether it took a new place (else it joined the last)."""
        parts, pieces = self.parts, self.pieces
        if pieces is not None:  # the last part is text that a delta may join
            last = parts[-1]
            if "thoughtSignature" not in last and part.get("thought") == last.get("thought") and _joins_text(part):
                pieces.append(part["text"])
                if "thoughtSignature" in part:
                    last["thoughtSignature"] = part["thoughtSignature"]
                return False
        elif parts and "functionCall" in part and not _call_name(part) and _call_name(parts[-1]):
            self._rest_of_call(parts[-1], part)
            return False
        self._close_text()
        parts.append(dict(part))
        if _joins_text(part):
            self.pieces = [part["text"]]
        return True

    @staticmethod
    def _rest_of_call(last: dict[str, Any], part: dict[str, Any]) -> None:
        """A call's ``args`` (or id, or signature) that came in a chunk after its name: they complete that call."""
        call, rest = dict(last["functionCall"]), part["functionCall"]
        if type(rest) is dict:
            for key, value in rest.items():
                if key != "name" and not call.get(key):
                    call[key] = value
        last["functionCall"] = call
        if "thoughtSignature" in part and "thoughtSignature" not in last:
            last["thoughtSignature"] = part["thoughtSignature"]

    def _close_text(self) -> None:
        if self.pieces is not None and len(self.pieces) > 1:
            self.parts[-1]["text"] = "".join(self.pieces)
        self.pieces = None

    def finished(self) -> list[dict[str, Any]]:
        """The parts, the last one's text joined (the content is left as it is: more chunks may follow)."""
        if self.pieces is None or len(self.pieces) == 1:
            return self.parts
        return [*self.parts[:-1], {**self.parts[-1], "text": "".join(self.pieces)}]


class GeminiStream(EventStreamReader):
    """Incremental reader of one ``streamGenerateContent`` answer, server-sent events or a JSON array (told apart by
    its first byte). ``finished`` turns True when the array closes; an event stream has no terminal event (its end is
    the body's). It holds MAX_ENTRIES parts in all; a part past them is counted in ``cut``."""

    __slots__ = ("_array", "_contents", "_depth", "_element", "_escaped", "_in_string", "_parts_left")

    def __init__(self, max_bytes: int | None = None) -> None:
        super().__init__(max_bytes)
        self._contents: dict[int, _Content] = {}
        self._parts_left = MAX_ENTRIES
        self._array: bool | None = None  # None until the first byte that is no whitespace
        self._depth = 0
        self._in_string = False
        self._escaped = False  # the chunk ended inside a string, right after a backslash
        self._element: list[bytes] = []  # the pieces of an array element begun in an earlier chunk

    def _abandon(self) -> None:
        super()._abandon()
        self._contents.clear()
        self._element.clear()

    def _lost(self) -> None:
        # The chunk left out may have carried any content's next part: none can be trusted whole.
        self._left_out.entries += sum(len(content.parts) for content in self._contents.values())
        self._contents.clear()

    def _feed(self, chunk: Any) -> None:
        if self._array is None:
            if type(chunk) is not bytes:
                chunk = chunk.encode() if isinstance(chunk, str) else bytes(chunk)
            if not self._started:
                self._started = True
                chunk = chunk.removeprefix(BOM)
            chunk = chunk.lstrip(WHITESPACE)
            if not chunk:
                return
            self._array = chunk[:1] == b"["
        if self._array:
            self._split(chunk if type(chunk) is bytes else bytes(chunk))
        else:
            EventStreamReader._feed(self, chunk)  # not ``super()``, made anew for every chunk

    def _split(self, chunk: bytes) -> None:
        """Read each element of the array the chunk completes (the objects at depth 2), and the array's end."""
        position = 0
        start = 0 if self._element else None
        if self._escaped:
            self._escaped = False
            position = 1
        depth, in_string = self._depth, self._in_string
        while True:
            if in_string:
                found = INSIDE_STRING.search(chunk, position)
                if found is None:
                    break
                position = found.end()
                if found[0] == b"\\":
                    if position == len(chunk):
                        self._escaped = True
                    position += 1
                else:
                    in_string = False
                continue
            found = OUTSIDE_STRING.search(chunk, position)
            if found is None:
                break
            byte, position = found[0], found.end()
            if byte == b'"':
                in_string = True
            elif byte in b"[{":
                depth += 1
                if depth == 2:
                    start = found.start()
            else:
                depth -= 1
                if depth == 1 and start is not None:
                    self._element.append(chunk[start:position])
                    raw = b"".join(self._element)
                    self._element.clear()
                    start = None
                    self._dispatch([raw])
                elif depth <= 0:
                    self._done = True
                    break
        if start is not None and depth >= 2:
            self._element.append(chunk[start:])
        self._depth, self._in_string = depth, in_string

    def _apply(self, obj: Any) -> None:
        for index, parts in _contents(obj):
            content = self._contents.get(index)
            if content is None:
                if len(self._contents) == MAX_TURNS:
                    self._left_out.entries += len(parts)
                    continue
                content = self._contents[index] = _Content()
            for part in parts:
                if type(part) is not dict or self._parts_left <= 0:
                    self._left_out.entries += 1
                elif content.add(part):
                    self._parts_left -= 1

    def turns(self) -> list[Turn]:
        """The turns read so far, one per candidate that calls a function, in candidate order; the parts are copies."""
        self._turn_cut = Cut()
        budget = Budget()
        out: list[Turn] = []
        try:
            for index in sorted(self._contents):
                turn = _turn(bounded(self._contents[index].finished(), _is_part, self._turn_cut, budget))
                if turn is not None:
                    out.append(turn)
        except Exception:  # noqa: BLE001 - a turn this reader cannot assemble is not remembered; the stream was relayed
            return []
        return out


#: The dialect's capture (``proxy.dialects.capture.Capture``).
CAPTURE = Readers(turns_from_json, GeminiStream)
