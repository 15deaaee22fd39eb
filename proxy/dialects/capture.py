"""What a dialect gives the relay to remember an upstream's answers: one reader for JSON bodies, one for
event streams. Both return whole turns (``proxy.turns.Turn``) tagged with the dialect, never raise, and
keep what they can read of a broken answer.

What one answer may leave in memory is bounded here, for every dialect and store: the entries of all its turns
(Responses output items, Messages content blocks, Chat tool calls of every choice), their nesting and the JSON
values in them all. Readers keep only what is part of a turn (``bounded``, within the answer's ``Budget``) and
count what they leave out (``Cut``); an answer or event that may hold more values than any turn could keep is not
parsed at all (``too_dense``).
"""

import asyncio
import codecs
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from proxy.turns import Turn

log = logging.getLogger("toolmend")

#: Most entries the turns of one answer keep in all: the output items of a response, the content blocks of a
#: message, the tool calls of all a completion's choices together. Turns are made of the first entries of an answer
#: only; the ones past it are not even looked at.
MAX_ENTRIES = 512
#: Deepest nesting kept inside one entry (the entry itself is level 1); a deeper entry is left out.
MAX_DEPTH = 32
#: Most JSON values (objects, arrays, strings, numbers... at every level, the parts of a message included) the
#: entries of one answer's turns keep in all; the entries past it are left out.
MAX_VALUES = 50_000
#: Most turns one answer gives (Chat's choices); MAX_ENTRIES and MAX_VALUES bound what they keep together.
MAX_TURNS = 128
#: Most pieces one streamed entry gathers beside its text (a Messages text block's citations).
MAX_PARTS = 1024
#: An answer, or one streamed event, that may hold more values than this is not parsed at all: it cannot be a turn.
MAX_READ_VALUES = 4 * MAX_VALUES
#: A JSON answer, or one streamed event, larger than this is read in a thread, beside the event loop.
LARGE_ANSWER_BYTES = 64 * 1024


@dataclass(slots=True)
class Cut:
    """What capture left out of one answer: entries that are no part of a turn or lie past its bounds, and events or
    answers too dense to read (``too_dense``), each counted once."""

    entries: int = 0


class StreamReader(Protocol):
    """Reads one event stream as the relay passes its raw chunks on, in order.

    ``finished`` turns True once the stream's terminal event has been read (Chat's ``[DONE]``, Responses'
    ``response.completed``, Messages' ``message_stop``): the relay holds that chunk back until the turns are
    stored, so a client that answers the instant it reads the end finds its calls remembered. Past
    ``max_bytes`` the reader gives up, sets ``abandoned`` and returns no turns; the relay goes on. ``cut``
    counts what its turns leave out of the stream."""

    @property
    def abandoned(self) -> bool: ...

    @property
    def cut(self) -> Cut: ...

    @property
    def finished(self) -> bool: ...

    def feed(self, chunk: bytes) -> None: ...

    def turns(self) -> list[Turn]: ...


class EventReader(StreamReader, Protocol):
    """A dialect's stream reader: ``feed`` reads every event a chunk completes; ``feed_aside`` leaves the large
    ones for ``read_held``, which ``ReadAside`` runs in a thread."""

    def feed_aside(self, chunk: bytes) -> bool: ...

    def read_held(self) -> None: ...


class ReadAside:
    """A stream reader as the relay sees it when the answer's ``body`` feeds it: ``body`` reads the large events
    of each chunk in a thread, beside the event loop, before the chunk goes on, so what the relay asks of it next
    (``finished``, ``turns``) is as it would be had it read them itself; ``feed`` does nothing. A relay stopped while
    the thread reads gets no turns from it: that thread may still be making them. Past LARGE_ANSWER_BYTES in all,
    the stream is ``large``: the relay makes its turns in a thread too."""

    __slots__ = ("_fed", "_reading", "reader")

    def __init__(self, reader: EventReader) -> None:
        self.reader = reader
        self._reading = False
        self._fed = 0

    @property
    def large(self) -> bool:
        """More than LARGE_ANSWER_BYTES went by: its turns are made in a thread too (``turns`` walks and copies them)."""
        return self._fed > LARGE_ANSWER_BYTES

    @property
    def abandoned(self) -> bool:
        return self.reader.abandoned

    @property
    def cut(self) -> Cut:
        return self.reader.cut

    @property
    def finished(self) -> bool:
        return self.reader.finished

    def feed(self, chunk: bytes) -> None:
        """Nothing: ``body`` fed the chunk already."""

    def turns(self) -> list[Turn]:
        return [] if self._reading else self.reader.turns()

    async def body(self, chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
        """``chunks`` as they come, each fed to the reader first."""
        async for chunk in chunks:
            self._fed += len(chunk)
            if self.reader.feed_aside(chunk):
                self._reading = True
                await asyncio.to_thread(self.reader.read_held)
                self._reading = False
            yield chunk


class Capture(Protocol):
    def from_json(self, body: bytes, cut: Cut | None = None) -> list[Turn]:
        """The turns of a complete JSON answer; what they leave out of it is counted in ``cut``."""
        ...

    def stream(self, max_bytes: int | None) -> EventReader:
        """A reader for one event-stream answer."""
        ...


@dataclass(slots=True)
class Budget:
    """What the turns of one answer may still keep, whatever its choices: entries looked at, values copied."""

    entries: int = MAX_ENTRIES
    values: int = MAX_VALUES
    #: The entries are the reader's own (parsed for this answer, shared with nothing): ``bounded`` walks them for the
    #: bounds and keeps them as they are, without copying them.
    owned: bool = False


@dataclass(frozen=True, slots=True)
class Readers:
    """A ``Capture`` made of a dialect's two readers: a function for JSON bodies, a reader class for streams."""

    json: Callable[[bytes, Cut | None], list[Turn]]
    events: Callable[[int | None], EventReader]

    def from_json(self, body: bytes, cut: Cut | None = None) -> list[Turn]:
        return self.json(body, cut)

    def stream(self, max_bytes: int | None) -> EventReader:
        return self.events(max_bytes)


@dataclass(frozen=True, slots=True)
class CaptureLimit:
    """How many bytes of one answer capture may read, and whom to tell when an answer is larger.

    ``gave_up`` is called once per such answer with why: ``"json"`` (a JSON answer) or ``"stream"``; and with
    ``"bounds"`` once per answer of which a remembered turn left something out (``trimmed``)."""

    max_bytes: int
    gave_up: Callable[[str], None]

    def trimmed(self, cut: Cut) -> None:
        """Say, without content, that ``cut`` left something out of an answer's turns; nothing when it did not."""
        if cut.entries:
            log.info("upstream answer held more than its remembered turns may (entries that are no part of one, or past %d "
                     "entries, %d levels or %d values in all): %d left out", MAX_ENTRIES, MAX_DEPTH, MAX_VALUES, cut.entries)
            self.gave_up("bounds")


_NESTED = (dict, list)
#: The same, for asking in C whether a container holds another (``set.isdisjoint`` of its values' types).
_CONTAINERS = frozenset(_NESTED)


class _Over(Exception):
    """An entry past MAX_DEPTH or the answer's MAX_VALUES."""


def bounded(entries: list[Any], part_of_turn: Callable[[Any], bool], cut: Cut, budget: Budget | None = None) -> list[dict[str, Any]]:
    """Copies of the ``entries`` one turn keeps, in order: of the first the answer's ``budget`` lets it look at, those
    ``part_of_turn`` says are (objects, by the dialect's test), each at most MAX_DEPTH deep, while the budget has
    values left. The entries looked at and the values copied (those of an entry left out too, so the work is bounded
    by it) are taken from ``budget``, which the turns of one answer share (a new one when None: the answer's only
    turn). ``cut`` counts every entry left out. Entries the budget says are ``owned`` are kept themselves, not copied."""
    kept: list[dict[str, Any]] = []
    budget = Budget() if budget is None else budget
    keep = _walked if budget.owned else _copied
    for seen, entry in enumerate(entries):
        if budget.entries <= 0 or budget.values <= 0:
            cut.entries += len(entries) - seen
            break
        budget.entries -= 1
        if type(entry) is not dict or not part_of_turn(entry):
            cut.entries += 1
            continue
        try:
            kept.append(keep(entry, 1, budget))
        except _Over:
            cut.entries += 1
    return kept


def _copied(value: Any, depth: int, budget: Budget) -> Any:
    """A copy of a container at ``depth``; its own values count against ``budget`` (scalars are shared: immutable)."""
    budget.values -= len(value)
    if budget.values < 0 or depth > MAX_DEPTH:
        raise _Over
    if type(value) is dict:
        return {key: _copied(inner, depth + 1, budget) if type(inner) in _NESTED else inner for key, inner in value.items()}
    return [_copied(inner, depth + 1, budget) if type(inner) in _NESTED else inner for inner in value]


def _walked(value: Any, depth: int, budget: Budget) -> Any:
    """The container at ``depth`` itself, once its own values and those of every container in it are counted against
    ``budget`` as ``_copied`` counts them (raising ``_Over`` where it would)."""
    budget.values -= len(value)
    if budget.values < 0 or depth > MAX_DEPTH:
        raise _Over
    inner = value.values() if type(value) is dict else value
    if not _CONTAINERS.isdisjoint(map(type, inner)):  # most containers hold scalars alone: asked in C, no walk
        if depth == MAX_DEPTH:  # what it holds is a level too deep, empty or not: charged as _copied charges it
            budget.values -= len(next(nested for nested in inner if type(nested) in _NESTED))
            raise _Over
        for nested in inner:
            if type(nested) in _NESTED and nested:  # an empty one adds no values
                _walked(nested, depth + 1, budget)
    return value


def read_answer(body: bytes | bytearray | memoryview | str, cut: Cut) -> Any:
    """A JSON answer parsed (a UTF-8 BOM ignored), or None when it is ``too_dense`` to read, which ``cut`` counts.
    Raises what ``orjson.loads`` raises."""
    if isinstance(body, memoryview):
        body = bytes(body)
    if isinstance(body, (bytes, bytearray)) and body[:3] == codecs.BOM_UTF8:
        body = body[3:]
    if too_dense(body):
        cut.entries += 1
        return None
    return orjson.loads(body)


def too_dense(raw: bytes | bytearray | str, limit: int = MAX_READ_VALUES) -> bool:
    """Whether ``raw`` may hold more than ``limit`` JSON values: every value but the first of an array or object
    follows a comma, so commas, braces and brackets, counted without a parse, are at least as many. A string full
    of commas counts too: an answer that dense is larger than any model writes."""
    if len(raw) <= limit:  # every value takes a byte at least
        return False
    if isinstance(raw, str):
        return raw.count(",") + raw.count("{") + raw.count("[") > limit
    return raw.count(b",") + raw.count(b"{") + raw.count(b"[") > limit
