"""Server-sent events read incrementally, as the relay passes an answer's raw chunks on: the framing every
dialect's stream capture shares (``proxy/dialects/*/capture.py``), so each reads only its own events.

What the framing handles: a UTF-8 BOM, CRLF and lone CR line ends split anywhere, multi-line ``data``, events
whose blank line is missing between them, ``data: [DONE]``, and ``max_bytes``. Only the unfinished last line is
buffered, each complete event is parsed once (one too dense to be part of a turn, never: ``too_dense``; a large
one, in a thread when read with ``feed_aside``), and nothing raises. An event whose terminating blank line never
arrived is not counted, as the SSE spec prescribes.
"""

from __future__ import annotations

import contextlib
from typing import Any

import orjson

from proxy.dialects.capture import LARGE_ANSWER_BYTES, Cut, too_dense
from proxy.turns import Turn

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError
BOM = b"\xef\xbb\xbf"
#: The last byte of a chunk whose last line is complete.
LINE_ENDS = b"\r\n"


class EventStreamReader:
    """The framing; a subclass reads each event's JSON in ``_apply`` and says what it holds in ``turns``.

    Once the stream passes ``max_bytes`` the reader lets go of everything it held (``_abandon``, which a
    subclass extends to drop its own state), reads nothing more and sets ``abandoned``: the relay goes on,
    and ``turns`` is empty. ``finished`` turns True at ``data: [DONE]``; a subclass sets ``_done`` at its
    protocol's own terminal event too.

    ``cut`` counts what the reader left out: events too dense to read, and what a subclass leaves out as it reads
    (``_left_out``) and when it makes its turns (``_turn_cut``, made anew by each ``turns``)."""

    __slots__ = ("_data", "_done", "_held", "_left_out", "_read", "_skip_lf", "_started", "_tail", "_turn_cut", "abandoned",
                 "max_bytes")

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self.abandoned = False
        self._done = False  # the terminal event was read
        self._read = 0  # bytes fed so far
        self._tail: list[bytes] = []  # pieces of the unfinished line; joined once, when it completes
        self._data: list[bytes] = []  # ``data:`` values of the event being read
        self._skip_lf = False  # the previous chunk ended in ``\r``: a leading ``\n`` completes that CRLF
        self._started = False  # the first line may carry a UTF-8 BOM, which SSE says to ignore
        self._held: list[tuple[bytes, list[bytes] | None]] = []  # events left for read_held: their JSON, and lines
        self._left_out = Cut()
        self._turn_cut = Cut()

    def feed(self, chunk: bytes | bytearray | memoryview | str) -> None:
        """Consume one raw chunk of the stream, and read every event it completes. Never raises."""
        if self.feed_aside(chunk):
            self.read_held()

    def feed_aside(self, chunk: bytes | bytearray | memoryview | str) -> bool:
        """Consume one raw chunk of the stream, but leave an event larger than ``LARGE_ANSWER_BYTES`` (and the
        events after it) held, unread: whether any are, for ``read_held`` to read, in a thread. Never raises."""
        if self.abandoned:
            return False
        try:
            self._read += len(chunk)
            if self.max_bytes is not None and self._read > self.max_bytes:
                self._abandon()
                return False
            self._feed(chunk)
        except Exception:  # noqa: BLE001 - capture is best effort; the relay must go on even if this reader is confused
            pass
        return bool(self._held)

    def read_held(self) -> None:
        """Read the events ``feed_aside`` held, in order. Never raises."""
        held, self._held = self._held, []
        for raw, lines in held:
            self._read_event(raw, lines)

    @property
    def cut(self) -> Cut:
        """What the turns read so far leave out of the stream."""
        return Cut(self._left_out.entries + self._turn_cut.entries)

    @property
    def finished(self) -> bool:
        """The stream's terminal event has been read."""
        return self._done

    def _abandon(self) -> None:
        self.abandoned = True
        self._tail.clear()
        self._data.clear()
        self._held.clear()

    def _feed(self, chunk: Any) -> None:
        if type(chunk) is not bytes:
            chunk = chunk.encode() if isinstance(chunk, str) else bytes(chunk)
        if not chunk:
            return
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                chunk = chunk[1:]
                if not chunk:
                    return
        # SSE's line ends are bytes' universal newlines (``\n``, ``\r\n``, ``\r``), split in one pass. A trailing
        # ``\r`` ends its line now, and a ``\n`` opening the next chunk is swallowed.
        self._skip_lf = chunk[-1] == 0x0D
        lines = chunk.splitlines()
        rest = b"" if chunk[-1] in LINE_ENDS else lines.pop()  # a last line the next chunk goes on with
        if not lines:
            self._tail.append(rest)
            return
        if self._tail:
            self._tail.append(lines[0])
            lines[0] = b"".join(self._tail)
            self._tail.clear()
        if rest:
            self._tail.append(rest)
        if not self._started:
            self._started = True
            if lines[0][:3] == BOM:
                lines[0] = lines[0][3:]
        data = self._data
        for line in lines:
            if not line:
                if data:
                    self._dispatch(data)
                    data.clear()
                else:
                    self._kept_alive()
            elif line[:5] == b"data:":
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line == b"data":
                data.append(b"")
            elif line[0] == 0x3A:
                self._kept_alive()
            # The other fields (``event``, ``id``, ``retry``) carry nothing we need.

    def _dispatch(self, data: list[bytes]) -> None:
        raw = data[0] if len(data) == 1 else b"\n".join(data)
        if raw == b"[DONE]":
            self._done = True
            return
        if self._held or len(raw) > LARGE_ANSWER_BYTES:
            self._held.append((raw, list(data) if len(data) > 1 else None))
        else:
            self._read_event(raw, data if len(data) > 1 else None)

    def _read_event(self, raw: bytes, lines: list[bytes] | None) -> None:
        """Parse one event and ``_apply`` it; an event too dense to be part of a turn is left out unparsed."""
        if too_dense(raw):
            self._left_out.entries += 1
            self._lost()
            return
        try:
            obj = _loads(raw)
        except _JSONDecodeError:
            if lines is not None:
                # Some servers forget the blank line between events; each line may still be a chunk.
                for part in lines:
                    with contextlib.suppress(Exception):  # remembering is best effort; the chunk is relayed anyway
                        self._apply(_loads(part))
            return
        try:  # noqa: SIM105 - not ``contextlib.suppress``: that is three Python calls for every event
            self._apply(obj)
        except Exception:  # noqa: BLE001 - an answer toolmend cannot read is relayed anyway, unremembered
            pass

    def _kept_alive(self) -> None:
        """A comment line, or a blank line that ends no event, was read: what a server sends to keep a stream open
        (nothing here: it carries nothing to read)."""

    def _lost(self) -> None:
        """An event was left out unread: a subclass forgets what it may have belonged to (nothing here: an event
        that completes something on its own, such as a Responses item, leaves the rest whole)."""

    def _apply(self, obj: Any) -> None:
        """Read one event's JSON (a subclass's business)."""
        raise NotImplementedError

    def turns(self) -> list[Turn]:
        """The turns read so far (a subclass's business)."""
        raise NotImplementedError
