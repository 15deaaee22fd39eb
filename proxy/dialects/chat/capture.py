"""Read upstream chat-completion answers and extract the tool-call turns worth remembering.

Clients (agent frameworks, IDE plugins, truncating UIs) regularly send histories in which a ``tool``
message survives but the assistant turn that declared its call was dropped. Strict providers reject such
histories (rule S2 of ``docs/provider-rules.md#s2``: no orphan tool messages). The proxy can repair them only
if it remembers the exact ``tool_calls`` the upstream originally sent, so every answer relayed from
``/v1/chat/completions`` goes through this module:

* :func:`turns_from_json` reads a non-streaming ``chat.completion`` body;
* :class:`StreamCapture` reads a ``text/event-stream`` of ``chat.completion.chunk`` events incrementally,
  as the proxy relays the raw network chunks, and reassembles the calls from their deltas.

Both return :class:`~proxy.turns.Turn` dicts, one per choice that made tool calls. The module is pure (no
I/O, no web framework): capture must never break the relay, so nothing here raises on bad input; it keeps
what it can understand and silently skips the rest.

What capture holds is bounded by :class:`~proxy.dialects.capture.CaptureLimit` (``--max-capture-bytes``): an answer larger than
that, JSON or stream, is still relayed in full, but its calls are not remembered. A hostile or broken
upstream (one endless SSE line, hundreds of megabytes of deltas) cannot grow the proxy with it. What one answer
keeps is bounded as ``proxy.dialects.capture`` says (MAX_TURNS choices, and calls: MAX_ENTRIES in all its choices
together, where an entry of ``tool_calls`` with neither an ``id`` nor a ``function`` is no call and is left out).

A choice's ``reasoning_details`` (OpenRouter's list of reasoning entries: ``reasoning.text``, ``reasoning.summary``,
``reasoning.encrypted``, the last carrying Gemini's thought signature) is kept with its calls, whole or not at all:
its entries count against the same bounds, and a list they cut short is not kept, since the provider takes only the
sequence it produced. Streamed, the entries arrive in pieces, one entry's pieces under one ``type`` and ``index``:
their ``text``, ``summary`` and ``data`` strings are joined in order, any other key keeps its first value (``null``
counts as not sent yet), and the entries stay in the order they first appeared.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from proxy.dialects.capture import MAX_ENTRIES, MAX_TURNS, Budget, Cut, Readers, bounded, read_answer
from proxy.dialects.sse import EventStreamReader
from proxy.turns import Turn, make_turn

__all__ = ["CAPTURE", "StreamCapture", "turns_from_json"]

# Keys of a streamed call delta that are rebuilt explicitly rather than merged as opaque extras; ``index``
# is stream bookkeeping and is absent from non-streaming calls, so it is not kept.
_CALL_KEYS = frozenset(("index", "id", "type", "function"))
_FUNCTION_KEYS = frozenset(("name", "arguments"))
# The keys of a streamed reasoning entry whose pieces are joined; any other key keeps its first value.
_PIECE_KEYS = frozenset(("text", "summary", "data"))


def _text(value: Any) -> str | None:
    return value if type(value) is str else None


def _reasoning(holder: dict[str, Any]) -> str | None:
    # OpenRouter and some vLLM builds name the field ``reasoning``; DeepSeek/Kimi use
    # ``reasoning_content``, which wins when both are present.
    value = holder.get("reasoning_content")
    if type(value) is not str:
        value = holder.get("reasoning")
    return value if type(value) is str else None


def is_call(call: dict[str, Any]) -> bool:
    """A tool call: an object with an ``id`` or a ``function``."""
    return type(call.get("id")) is str or type(call.get("function")) is dict


def _whole(entry: dict[str, Any]) -> bool:
    """Every object of a ``reasoning_details`` list belongs to it: the list goes back whole or not at all."""
    return True


def _details(value: Any, cut: Cut, budget: Budget) -> list[Any] | None:
    """Copies of a choice's ``reasoning_details`` entries, or None when it has none or the bounds would cut it short."""
    if type(value) is not list or not value:
        return None
    kept = bounded(value, _whole, cut, budget)
    if len(kept) != len(value):
        cut.entries += len(kept)
        return None
    return kept


def _choices_with(obj: Any, key: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each choice of a completion (or chunk) that carries an object under ``key`` ("message" or "delta")."""
    choices = obj.get("choices") if type(obj) is dict else None
    for choice in choices if type(choices) is list else ():
        inner = choice.get(key) if type(choice) is dict else None
        if type(inner) is dict:
            yield choice, inner


def turns_from_json(body: bytes | bytearray | memoryview | str, cut: Cut | None = None) -> list[Turn]:
    """The tool-call turns of a non-streaming ``chat.completion`` body, one per choice that made calls (MAX_TURNS at
    most, their calls within one ``Budget``), what they leave out counted in ``cut``.

    ``tool_calls`` entries are returned exactly as the upstream sent them (every key, in order), so that a
    re-inserted turn is byte-for-byte what the upstream produced (S13: e.g. Gemini's ``extra_content``
    thought signatures must survive). Never raises: anything unreadable yields ``[]``.
    """
    cut = Cut() if cut is None else cut
    budget = Budget()
    try:
        obj = read_answer(body, cut)
        out: list[Turn] = []
        for _, message in _choices_with(obj, "message"):
            calls = message.get("tool_calls")
            if type(calls) is not list:
                continue
            if len(out) == MAX_TURNS:
                cut.entries += 1
                break
            # What is no call cannot be re-inserted as one; keeping it would only hand garbage to repair.
            kept = bounded(calls, is_call, cut, budget)
            if kept:
                details = _details(message.get("reasoning_details"), cut, budget)
                out.append(make_turn(kept, _text(message.get("content")), _reasoning(message), details))
        return out
    except Exception:  # noqa: BLE001 - remembering is best effort: an answer toolmend cannot read is relayed unremembered
        return []


def _merge(dst: dict[str, Any], src: dict[str, Any]) -> None:
    """Merge a later delta's extras into what was already received: the first value wins.

    Providers that repeat fields on every delta must not make them grow or change; nested objects (such as
    ``extra_content.google``) may arrive piecewise, so they are merged key by key. A ``null`` counts as
    "not sent yet".
    """
    for key, value in src.items():
        old = dst.get(key)
        if old is None:
            dst[key] = value
        elif type(old) is dict and type(value) is dict:
            _merge(old, value)


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    # Returned turns must not alias state that later deltas merge into.
    return {k: _copy(v) if type(v) is dict else v for k, v in value.items()}


class _Call:
    __slots__ = ("args", "extra", "fextra", "id", "name", "saw_function", "type")

    def __init__(self) -> None:
        self.id: str | None = None
        self.type: str | None = None
        self.name: str | None = None
        self.args: list[str] = []
        self.fextra: dict[str, Any] | None = None
        self.extra: dict[str, Any] | None = None
        self.saw_function = False

    def add(self, delta: dict[str, Any]) -> None:
        value = delta.get("id")
        if self.id is None and type(value) is str and value:
            self.id = value
        value = delta.get("type")
        if self.type is None and type(value) is str and value:
            self.type = value
        function = delta.get("function")
        if type(function) is dict:
            self.saw_function = True
            value = function.get("name")
            if self.name is None and type(value) is str and value:
                self.name = value
            value = function.get("arguments")
            if type(value) is str:
                if value:
                    self.args.append(value)
            elif type(value) in (dict, list):
                # Off-spec providers (some Ollama builds) send arguments as an object; the wire format is text.
                self.args.append(orjson.dumps(value).decode())
            if len(function) > 2 or not _FUNCTION_KEYS.issuperset(function):
                extra = {k: v for k, v in function.items() if k not in _FUNCTION_KEYS}
                if self.fextra is None:
                    self.fextra = extra
                else:
                    _merge(self.fextra, extra)
        if len(delta) > 4 or not _CALL_KEYS.issuperset(delta):
            extra = {k: v for k, v in delta.items() if k not in _CALL_KEYS}
            if self.extra is None:
                self.extra = extra
            else:
                _merge(self.extra, extra)

    def build(self) -> dict[str, Any]:
        call: dict[str, Any] = {"id": self.id, "type": self.type or "function"}
        # A non-function call type (e.g. OpenAI ``custom``) that never sent ``function`` must not gain one.
        if self.saw_function or call["type"] == "function":
            function: dict[str, Any] = {"name": self.name or "", "arguments": "".join(self.args)}
            if self.fextra:
                function.update(_copy(self.fextra))
            call["function"] = function
        if self.extra:
            for key, value in self.extra.items():
                call[key] = _copy(value) if type(value) is dict else value
        return call


class _Details:
    """The ``reasoning_details`` entries of one streamed choice, put together from their pieces."""

    __slots__ = ("entries", "lost", "pieces")

    def __init__(self) -> None:
        # Keyed by (type, index), in the order the entries first appeared; ``pieces`` holds their joined strings.
        self.entries: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.pieces: dict[tuple[Any, Any], dict[str, list[str]]] = {}
        self.lost = False

    def add(self, delta: dict[str, Any]) -> None:
        kind, index = delta.get("type"), delta.get("index")
        key = (kind if type(kind) is str else None, index if type(index) is int else None)
        entry = self.entries.get(key)
        if entry is None:
            if len(self.entries) == MAX_ENTRIES:
                self.lost = True  # more entries than a turn keeps: the list could only be kept cut short
                return
            entry = self.entries[key] = {}
            self.pieces[key] = {}
        pieces = self.pieces[key]
        for name, value in delta.items():
            if name in _PIECE_KEYS and type(value) is str:
                if name in pieces:
                    pieces[name].append(value)
                    continue
                if entry.get(name) is None:
                    pieces[name] = [value]
                    entry[name] = value  # holds the key's place; the joined pieces replace it
                    continue
            old = entry.get(name)
            if old is None:
                entry[name] = value
            elif type(old) is dict and type(value) is dict:
                _merge(old, value)

    def build(self) -> list[dict[str, Any]] | None:
        if self.lost or not self.entries:
            return None
        out = []
        for key, entry in self.entries.items():
            built = _copy(entry)
            for name, parts in self.pieces[key].items():
                built[name] = "".join(parts)
            out.append(built)
        return out


class _Full(Exception):
    """The answer's choices hold all the calls its ``Budget`` lets them."""


class _Choice:
    __slots__ = ("by_id", "by_index", "calls", "content", "details", "held", "last", "reasoning")

    def __init__(self, held: Budget) -> None:
        # Shared by all the choices of one answer: what they may still hold.
        self.held = held
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.details = _Details()
        # Keys are (index, generation): ``generation`` > 0 only when a provider reuses an index for a
        # different call, so sorting the keys gives the calls in index order either way.
        self.calls: dict[tuple[int, int], _Call] = {}
        self.by_index: dict[int, tuple[int, int]] = {}
        self.by_id: dict[str, tuple[int, int]] = {}
        self.last: tuple[int, int] | None = None

    def _new(self, key: tuple[int, int]) -> _Call:
        if self.held.entries <= 0:
            raise _Full
        self.held.entries -= 1
        call = self.calls[key] = _Call()
        self.by_index[key[0]] = key
        return call

    def add_call(self, delta: dict[str, Any]) -> None:
        index = delta.get("index")
        cid = delta.get("id")
        if type(cid) is not str or not cid:
            cid = None
        if type(index) is int:
            key = self.by_index.get(index)
            if key is None:
                key = (index, 0)
                call = self._new(key)
            else:
                call = self.calls[key]
                if cid is not None and call.id is not None and call.id != cid:
                    # Some OpenAI-compatible servers stream every parallel call at index 0; a new id
                    # means a new call, not a rename of the previous one.
                    key = self.by_id.get(cid) or (index, key[1] + 1)
                    call = self.calls.get(key) or self._new(key)
                    self.by_index[index] = key
        else:
            # No index: a new id starts a new call, anything else continues the latest one.
            key = self.by_id.get(cid) if cid is not None else self.last
            if key is None:
                # ``last`` is always a key of ``calls``: calls are only ever added.
                if self.last is not None and self.calls[self.last].id is None:
                    key = self.last
                else:
                    key = (max(self.by_index) + 1 if self.by_index else 0, 0)
                    self._new(key)
            call = self.calls[key]
        call.add(delta)
        if cid is not None and call.id == cid:
            self.by_id.setdefault(cid, key)
        self.last = key

    def turn(self, cut: Cut, budget: Budget) -> Turn | None:
        calls = bounded([self.calls[key].build() for key in sorted(self.calls) if self.calls[key].id is not None], is_call, cut, budget)
        if not calls:
            return None
        details = _details(self.details.build(), cut, budget)
        if self.details.lost:
            cut.entries += 1
        # Empty text counts as absent, matching non-streaming answers that carry ``content: null``.
        return make_turn(calls, "".join(self.content) or None, "".join(self.reasoning) or None, details)


class StreamCapture(EventStreamReader):
    """Incremental reader of an SSE ``chat.completion.chunk`` stream that reassembles its tool calls.

    Feed it the raw network chunks in order, exactly as relayed; :meth:`turns` can be asked at any time
    (the framing and ``max_bytes`` are ``EventStreamReader``'s; ``finished`` turns True at ``[DONE]``).

    If the stream is cut off, :meth:`turns` returns the calls that already have an id, with their
    ``arguments`` kept as received so far (possibly incomplete JSON): the ids are what recall needs, and
    rewriting the text would be guessing.
    """

    __slots__ = ("_calls_left", "_choices")

    def __init__(self, max_bytes: int | None = None) -> None:
        super().__init__(max_bytes)
        self._choices: dict[int, _Choice] = {}
        self._calls_left = Budget()

    def _abandon(self) -> None:
        super()._abandon()
        self._choices.clear()

    def _lost(self) -> None:
        # The chunk left out may have carried a piece of any call's arguments: no call can be trusted whole.
        self._left_out.entries += len(self._choices)
        self._choices.clear()

    def _apply(self, obj: Any) -> None:
        if type(obj) is dict and obj.get("error"):
            return
        for choice, delta in _choices_with(obj, "delta"):
            index = choice.get("index")
            if type(index) is not int:
                index = 0
            state = self._choices.get(index)
            if state is None:
                if len(self._choices) == MAX_TURNS:
                    self._left_out.entries += 1
                    continue
                state = self._choices[index] = _Choice(self._calls_left)
            value = delta.get("content")
            if type(value) is str and value:
                state.content.append(value)
            value = _reasoning(delta)
            if value:
                state.reasoning.append(value)
            value = delta.get("reasoning_details")
            if type(value) is list:
                for detail in value:
                    if type(detail) is dict:
                        state.details.add(detail)
            calls = delta.get("tool_calls")
            if type(calls) is list:
                for call in calls:
                    if type(call) is dict:
                        try:
                            state.add_call(call)
                        except _Full:
                            self._left_out.entries += 1

    def turns(self) -> list[Turn]:
        """The tool-call turns seen so far, one per choice (in choice-index order) with an identified call."""
        out: list[Turn] = []
        self._turn_cut = Cut()
        budget = Budget()
        try:
            for index in sorted(self._choices):
                turn = self._choices[index].turn(self._turn_cut, budget)
                if turn is not None:
                    out.append(turn)
        except Exception:  # noqa: BLE001 - a turn this reader cannot assemble is not remembered; the stream was relayed
            pass
        return out


#: The dialect's capture (``proxy.dialects.capture.Capture``).
CAPTURE = Readers(turns_from_json, StreamCapture)
