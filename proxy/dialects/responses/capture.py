"""Read upstream Responses answers (``POST /v1/responses``) and extract the turns worth remembering.

A Responses turn is re-inserted whole: a call can only be replayed to a reasoning model together with the
reasoning item it came from (RS-4, RS-6), and that item is only usable as the upstream sent it (its
``encrypted_content`` is verified, RS-11). So capture keeps *every* output item of a response that made at least
one call, in order and exactly as parsed (reasoning, calls of every family, messages, item types toolmend does
not know), recalled by each call's ``call_id`` and by the response id (``previous_response_id`` requests). An
entry of ``output`` that is no item (not an object, or one with neither ``type`` nor ``role``) is left out, and
so is what lies past a turn's bounds (``proxy.dialects.capture.bounded``).

* :func:`turns_from_json` reads a non-streaming ``response`` object (``output: [...]``);
* :class:`ResponsesStreamCapture` reads the event stream. Completed items come from
  ``response.output_item.done``, never from ``.added`` (whose arguments are partial and whose
  ``encrypted_content`` "may be incomplete"); items never seen done are taken from the ``response.output``
  of the terminal event (``response.completed``, ``.incomplete`` or ``.failed``). Deltas are not read at all.

The SSE framing is ``proxy.dialects.sse``'s; nothing here raises and what a stream reader holds is bounded by ``max_bytes``.
"""

from __future__ import annotations

from typing import Any

from proxy.dialects.capture import MAX_ENTRIES, Budget, Cut, Readers, bounded, read_answer
from proxy.dialects.responses.items import CALL_TYPES
from proxy.dialects.sse import EventStreamReader
from proxy.turns import Turn

__all__ = ["CAPTURE", "ResponsesStreamCapture", "turns_from_json"]


_TERMINAL = frozenset(("response.completed", "response.incomplete", "response.failed"))
# Events that carry the response object before any item (its id is known from the first of them).
_OPENING = frozenset(("response.created", "response.queued", "response.in_progress"))


def is_item(item: dict[str, Any]) -> bool:
    """An output item: an object with a ``type``, or a message without one (its ``role``)."""
    return type(item.get("type")) is str or type(item.get("role")) is str


def _turns(items: list[dict[str, Any]], response_id: str | None) -> list[Turn]:
    """The one turn of a response's output items, or none when it holds neither a call nor an assistant message
    made with reasoning (nothing a later request could need back), or nothing could recall it. Recalled by each
    call's ``call_id``, by the id of each assistant message (whose reasoning a filter may drop: RS-5) and by
    the response id."""
    calls: list[str] = []
    messages: list[str] = []
    called = reasoned = False
    for item in items:  # one pass, asking each item its kind once: items.recall_key, written out (runs on every answer)
        kind = item.get("type", "message")
        if type(kind) is str and kind in CALL_TYPES:  # items.is_call
            called = True
            key = item.get("call_id")  # items.call_id_of of a call
            if type(key) is str and key:
                calls.append(key)
        elif kind == "message":
            if item.get("role") == "assistant":  # items.message_key
                key = item.get("id")
                if type(key) is str and key:
                    messages.append(key)
        else:
            reasoned = reasoned or kind == "reasoning"
    if not called and not (messages and reasoned):
        return []
    ids = list(dict.fromkeys([*calls, *messages]))
    if response_id is not None:
        ids.append(response_id)
    if not ids:
        return []
    return [{"dialect": "responses", "ids": ids, "response_id": response_id, "items": items}]


def _response_id(response: Any) -> str | None:
    value = response.get("id") if type(response) is dict else None
    return value if type(value) is str and value else None


def turns_from_json(body: bytes | bytearray | memoryview | str, cut: Cut | None = None) -> list[Turn]:
    """The turn of a non-streaming ``response`` body (at most one), what it leaves out counted in ``cut``. Never
    raises: anything unreadable yields ``[]``.

    Entries of ``output`` that are no items are left out: they could only hand garbage to repair."""
    cut = Cut() if cut is None else cut
    try:
        obj = read_answer(body, cut)
        # Some compatible servers leave ``object`` out; an error body or another object is not an answer.
        if type(obj) is not dict or obj.get("object", "response") != "response":
            return []
        output = obj.get("output")
        if type(output) is not list:
            return []
        return _turns(bounded(output, is_item, cut, Budget(owned=True)), _response_id(obj))
    except Exception:  # noqa: BLE001 - remembering is best effort: an answer toolmend cannot read is relayed unremembered
        return []


class ResponsesStreamCapture(EventStreamReader):
    """Incremental reader of a Responses event stream.

    The SSE framing is ``EventStreamReader``'s; this class only reads the events. ``finished`` turns True at the
    first terminal event (``response.completed``, ``.incomplete``, ``.failed``), a bare ``error`` event, or
    ``data: [DONE]``, which some compatible servers send instead.

    A stream cut off before its terminal event still yields the items whose ``.done`` arrived: their calls are
    complete, and a call followed by ``response.failed`` is remembered too, since the client may keep it. It holds
    MAX_ENTRIES items at most, and only items (``is_item``).
    """

    __slots__ = ("_done_items", "_final_items", "_id")

    def __init__(self, max_bytes: int | None = None) -> None:
        super().__init__(max_bytes)
        self._done_items: dict[int, dict[str, Any]] = {}  # by output_index
        self._final_items: list[tuple[int, dict[str, Any]]] = []  # the terminal event's response.output: (position, item)
        self._id: str | None = None

    def _abandon(self) -> None:
        super()._abandon()
        self._done_items.clear()
        self._final_items.clear()

    def _apply(self, obj: Any) -> None:
        kind = obj.get("type") if type(obj) is dict else None
        if kind == "response.output_item.done":
            item = obj.get("item")
            if type(item) is dict and is_item(item):
                index = obj.get("output_index")
                if type(index) is not int:
                    index = max(self._done_items, default=-1) + 1
                if index in self._done_items or len(self._done_items) < MAX_ENTRIES:
                    self._done_items[index] = item
                    return
            self._left_out.entries += 1
        elif kind in _OPENING:
            if self._id is None:
                self._id = _response_id(obj.get("response"))
        elif kind in _TERMINAL:
            self._done = True
            response = obj.get("response")
            if self._id is None:
                self._id = _response_id(response)
            output = response.get("output") if type(response) is dict else None
            if type(output) is list:
                first = output[:MAX_ENTRIES]
                self._final_items = [(index, item) for index, item in enumerate(first) if type(item) is dict and is_item(item)]
                self._left_out.entries += len(output) - len(self._final_items)
        elif kind == "error":
            self._done = True

    def turns(self) -> list[Turn]:
        """The response's turn as read so far (at most one), as copies the reader never touches again."""
        self._turn_cut = Cut()
        try:
            items = dict(self._done_items)
            for index, item in self._final_items:
                items.setdefault(index, item)
            return _turns(bounded([items[index] for index in sorted(items)], is_item, self._turn_cut), self._id)
        except Exception:  # noqa: BLE001 - a turn this reader cannot assemble is not remembered; the stream was relayed
            return []


#: The dialect's capture (``proxy.dialects.capture.Capture``).
CAPTURE = Readers(turns_from_json, ResponsesStreamCapture)
