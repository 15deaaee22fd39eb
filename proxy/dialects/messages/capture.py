"""Read upstream Anthropic Messages answers and extract the assistant turns worth remembering.

An Anthropic history breaks when a client drops an assistant message whose ``tool_use`` blocks are still
answered by ``tool_result`` blocks (AM-4), and it cannot be mended by re-inserting the ``tool_use`` alone:
with thinking on, the assistant message of the current tool loop must start with its signed thinking block
(AM-9), and that block must come back exactly as the server sent it (AM-13, AM-14). So every answer relayed
from ``/v1/messages`` that calls a client tool is remembered *whole*: one :class:`~proxy.turns.Turn` per
assistant message, with every content block in order (thinking with its signature, redacted thinking, text,
``tool_use`` with its input, server tool blocks, block types this code does not know) and the message id.

* :func:`turns_from_json` reads a non-streaming ``message`` body; its blocks are kept exactly as parsed.
* :class:`MessagesStreamCapture` reads the ``text/event-stream`` form as the relay passes its chunks on and
  rebuilds each block from ``content_block_start`` (the skeleton, whose keys and their order are kept) and
  its deltas, so that a streamed answer is remembered as the same blocks its JSON form would have carried.

Like the chat capture, nothing here raises on bad input, and what one answer may hold is bounded by
``max_bytes`` (:class:`~proxy.dialects.capture.CaptureLimit`); what one turn keeps, by the bounds of
``proxy.dialects.capture`` (an entry of ``content`` that is no block, an object without a ``type``, is left out).
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.dialects.capture import MAX_ENTRIES, MAX_PARTS, MAX_VALUES, Cut, Readers, bounded, read_answer, too_dense
from proxy.dialects.messages.blocks import TOOL_USE, Block
from proxy.dialects.sse import EventStreamReader
from proxy.turns import Turn

__all__ = ["CAPTURE", "MessagesStreamCapture", "turns_from_json"]


def _turn(blocks: list[Block], message_id: str | None) -> Turn | None:
    """The turn of one assistant message, or None when it calls no client tool (nothing to re-insert)."""
    ids = [block["id"] for block in blocks if block.get("type") == TOOL_USE and type(block.get("id")) is str]  # ``is_tool_use``: blocks are dicts
    if not ids:
        return None
    return {"dialect": "messages", "ids": ids, "message_id": message_id, "blocks": blocks}


def is_block(block: dict[str, Any]) -> bool:
    """A content block: an object with a ``type``."""
    return type(block.get("type")) is str


def turns_from_json(body: bytes | bytearray | memoryview | str, cut: Cut | None = None) -> list[Turn]:
    """The turn of a non-streaming ``message`` body: ``[]`` or one turn, what it leaves out counted in ``cut``.
    Never raises.

    Blocks are returned exactly as parsed (every key, in order, unknown ones too); entries of ``content``
    that are no blocks are left out, since no request could carry them back."""
    cut = Cut() if cut is None else cut
    try:
        obj = read_answer(body, cut)
        if type(obj) is not dict or obj.get("type", "message") != "message" or obj.get("role", "assistant") != "assistant":
            return []
        content = obj.get("content")
        if type(content) is not list:
            return []
        message_id = obj.get("id")
        turn = _turn(bounded(content, is_block, cut), message_id if type(message_id) is str else None)
        return [] if turn is None else [turn]
    except Exception:  # noqa: BLE001 - remembering is best effort: an answer toolmend cannot read is relayed unremembered
        return []


class _OpenBlock:
    """One content block between its ``content_block_start`` and its ``content_block_stop``.

    Text and thinking arrive as many small deltas; they are collected as lists and joined once, at stop."""

    __slots__ = ("block", "json", "pieces")

    def __init__(self, skeleton: dict[str, Any]) -> None:
        # ``index`` belongs to the event, not the block; a replayed block that carries it is rejected (AM-18).
        self.block: Block = {key: value for key, value in skeleton.items() if key != "index"}
        self.pieces: dict[str, list[str]] = {}
        self.json: list[str] | None = None  # ``partial_json`` texts; None until the first ``input_json_delta``

    def append(self, field: str, value: Any) -> None:
        if type(value) is not str:
            return
        pieces = self.pieces.get(field)
        if pieces is None:
            start = self.block.get(field)
            pieces = self.pieces[field] = [start] if type(start) is str else []
        pieces.append(value)

    def delta(self, delta: dict[str, Any]) -> None:
        # Each delta type applies to the block types the API streams it for, as the Anthropic SDK's own
        # accumulator does: a stray delta must not graft a foreign key onto a block (AM-18 on replay).
        kind = delta.get("type")
        block_type = self.block.get("type")
        if kind == "input_json_delta":
            if "input" in self.block or block_type in ("tool_use", "server_tool_use"):
                value = delta.get("partial_json")
                if type(value) is str:
                    if self.json is None:
                        self.json = []
                    self.json.append(value)
        elif kind == "text_delta":
            if block_type == "text":
                self.append("text", delta.get("text"))
        elif kind == "thinking_delta":
            if block_type == "thinking":
                self.append("thinking", delta.get("thinking"))
        elif kind == "signature_delta":
            if block_type == "thinking" and type(delta.get("signature")) is str:
                self.block["signature"] = delta["signature"]
        elif kind == "citations_delta" and block_type == "text" and "citation" in delta:
            citations = self.block.get("citations")
            if type(citations) is not list:
                citations = self.block["citations"] = []
            if len(citations) < MAX_PARTS:
                citations.append(delta["citation"])

    def close(self) -> Block | None:
        """The finished block, or None when its input cannot be read.

        The concatenated ``partial_json`` replaces the skeleton's ``input`` (no text at all means ``{}``). Input
        that is not a JSON object is not kept anywhere: the API only ever sends objects, a block carrying
        anything else would be rejected when replayed (AM-8), and replacing it with ``{}`` would re-insert a
        call with arguments the model never chose. The block is dropped and its id is not remembered; so is one whose
        input may hold more values than a turn keeps (``too_dense``: it is not parsed)."""
        block = self.block
        for field, pieces in self.pieces.items():
            block[field] = "".join(pieces)
        if self.json is not None:
            text = "".join(self.json)
            if not text.strip():
                block["input"] = {}
            elif too_dense(text, MAX_VALUES):
                return None
            else:
                try:
                    value = orjson.loads(text)
                except orjson.JSONDecodeError:
                    return None
                if type(value) is not dict:
                    return None
                block["input"] = value
        return block


class MessagesStreamCapture(EventStreamReader):
    """Incremental reader of one Messages event stream; rebuilds the assistant message's blocks.

    The SSE framing is ``EventStreamReader``'s; this class only says what an event means. ``finished`` turns
    True at ``message_stop`` or at an ``error`` event.

    A block counts once its ``content_block_stop`` was read: a stream cut off (or ended by an ``error``
    event) is remembered with the blocks that were complete, in index order, so the calls whose input was
    whole stay recallable and a half-streamed thinking block, which has no signature yet, is never kept. It holds
    MAX_ENTRIES blocks at most, and only blocks (``is_block``).
    """

    __slots__ = ("_closed", "_message_id", "_open")

    def __init__(self, max_bytes: int | None = None) -> None:
        super().__init__(max_bytes)
        self._message_id: str | None = None
        self._open: dict[int, _OpenBlock] = {}
        self._closed: list[tuple[int, Block]] = []

    def _abandon(self) -> None:
        super()._abandon()
        self._open.clear()
        self._closed.clear()

    def _lost(self) -> None:
        # The event left out may have been a delta of any open block: none of them can be trusted whole.
        self._left_out.entries += len(self._open)
        self._open.clear()

    def _apply(self, obj: Any) -> None:
        if type(obj) is not dict:
            return
        kind = obj.get("type")
        index = obj.get("index")
        if kind == "content_block_delta":
            delta = obj.get("delta")
            open_block = self._open.get(index) if type(index) is int else None
            if open_block is not None and type(delta) is dict:
                open_block.delta(delta)
        elif kind == "content_block_start":
            block = obj.get("content_block")
            if type(index) is int and type(block) is dict and is_block(block) and (
                    index in self._open or len(self._open) + len(self._closed) < MAX_ENTRIES):
                # A second start for an index still open replaces a block that was never finished.
                self._open[index] = _OpenBlock(block)
            else:
                self._left_out.entries += 1
        elif kind == "content_block_stop":
            if type(index) is int and index in self._open:
                closed = self._open.pop(index).close()
                if closed is not None:
                    self._closed.append((index, closed))
                else:
                    self._left_out.entries += 1
        elif kind == "message_start":
            message = obj.get("message")
            message_id = message.get("id") if type(message) is dict else None
            if self._message_id is None and type(message_id) is str:
                self._message_id = message_id
        elif kind in ("message_stop", "error"):
            self._done = True

    def turns(self) -> list[Turn]:
        """The turn of the blocks stopped so far (``[]`` or one turn); the blocks are copies."""
        self._turn_cut = Cut()
        try:
            blocks = bounded([block for _, block in sorted(self._closed, key=lambda pair: pair[0])], is_block, self._turn_cut)
            turn = _turn(blocks, self._message_id)
        except Exception:  # noqa: BLE001 - a turn this reader cannot assemble is not remembered; the stream was relayed
            return []
        return [] if turn is None else [turn]


#: The dialect's capture (``proxy.dialects.capture.Capture``).
CAPTURE = Readers(turns_from_json, MessagesStreamCapture)
