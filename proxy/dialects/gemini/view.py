"""A Gemini ``contents`` list read into the engine's neutral view, and the view written back into contents.

The structural rules (``proxy/repair/rules``) read a chat-shaped history: assistant entries with ``tool_calls``,
``tool`` entries with a ``tool_call_id``, anything else by its role. Here a ``model`` content is one assistant
entry, with one call per call part; each call carries the parts before it since the previous call (``BEFORE``:
thought parts, text, a signed empty text), so the thinking travels with the call it produced. A user content is
cut at its response parts: each one is a ``tool`` entry, each run of other parts a ``user`` entry. What is not a
content with a parts list, or has a role no rule knows, is an ``item`` entry, written back as sent.

Gemini calls and responses may carry no ``id`` (GN-9). A call without one gets a view id naming its position
(``toolmend:contents[1].parts[0]``); a response without one answers the first unanswered call of its name in the latest call content before it
(by position when it has no name), else it is an orphan with a view id of its own. A view id is never written: a
part keeps the id it was read with, and only an id a rule renamed is written into a copy of the part.

The plan may leave runs of contents out of the view (``inert_runs``): contents no structural rule would touch, read
around and written back as sent, in place.

Writing back groups consecutive entries of one side by the content they were read from; a made-up response joins
the response content before it. A content whose parts come back as the very objects read, in order, is the
client's own object, so an untouched content goes upstream exactly as sent. A made-up response says plainly that
the call was not executed (``{"error": <placeholder>}``); a call synthesized for an orphan has ``args: {}``; a
call from memory comes back with its parts byte for byte (its thought parts and ``thoughtSignature`` included),
after the client's own parts of that content that memory does not hold.
"""

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import is_
from typing import Any

import orjson

from proxy.dialects.capture import MAX_ENTRIES
from proxy.dialects.gemini.keys import call_key
from proxy.dialects.gemini.parts import CALL, MODEL, RESPONSE, USER, function_call, id_of, name_of
from proxy.repair.history import Message, Pairing
from proxy.turns import Turn

#: Key of a view entry or call holding what it stands for (a call or ``tool`` entry: its part; others: the content).
NATIVE = "\x00native"
#: Key of a call holding the parts that came directly before its call part, which travel with it.
BEFORE = "\x00before"
#: Key of a remembered call holding the parts after the turn's last call.
AFTER = "\x00after"
#: Key of a call from memory: its parts are the upstream's, and give way to equal parts the client kept.
RECALLED = "\x00recalled"
#: Key of a call or ``tool`` entry holding the id it was read with (a view id when its part has none).
READ = "\x00read"
#: Key of an assistant entry read from a content without calls: its parts stand before any call the rules attach.
LEAD = "\x00lead"


#: What the ids the view makes up for calls and responses without one begin with (they name the part's position).
VIEW_ID = "toolmend:"


def is_view_id(key: Any) -> bool:
    """An id the view made up for a call or response without one: never written into a part."""
    return type(key) is str and key.startswith(VIEW_ID)


@dataclass(slots=True)
class View:
    """The entries read from one ``contents`` list, and what writing them back needs: ``read_parts`` per content its
    parts as read, ``position`` per entry (by identity) the content it came from, ``kept`` every entry read (their
    identities stay unique while ``origin`` maps them). Writing them back fills ``placed``: per content written, the
    position in ``contents`` of the very content it is, or None for one rebuilt."""

    contents: list[Any]
    entries: list[Message] = field(default_factory=list)
    position: dict[int, int] = field(default_factory=dict)
    read_parts: list[list[Any]] = field(default_factory=list)
    kept: list[Message] = field(default_factory=list)
    placed: list[int | None] = field(default_factory=list)
    #: Where the calls and results of ``entries`` stand as read (what ``Pairing(entries)`` would walk to find).
    pairing: Pairing = field(default_factory=Pairing)
    #: The runs of contents left out (``inert_runs``), each by the first entry read after it (``None``: the last run,
    #: when the contents end with it): written back, as sent, just before that entry's content.
    before: dict[int | None, range] = field(default_factory=dict)


def view_call(part: dict[str, Any], call: dict[str, Any], key: str, before: list[Any]) -> dict[str, Any]:
    """The chat-shaped call a call part stands for."""
    made: dict[str, Any] = {"id": key, "type": "function", "function": {"name": name_of(call), "arguments": "{}"},
                            NATIVE: part, READ: key}
    if before:
        made[BEFORE] = before
    return made


def inert_runs(contents: list[Any], sealed: dict[int, tuple[list[Any], ...]]) -> list[tuple[range, bool]]:
    """The runs of contents the structural rules need not read, each with whether it holds a call content. A content is
    inert when it holds neither calls nor responses, or is a call content answered exactly by the user contents after
    it, whose calls and responses nothing else names (``sealed``: by the identity of its first call part, the parts
    lists of those contents, in order; the rules over contents may have copied the call content, never with other
    calls, since one that renames a call recalls its turn, which then names it). A run ends where a model content
    follows, or the contents end, so that every block of responses and every walk up to the next model entry ends
    where it did; the view reads around the runs and writes them back as they are."""
    runs: list[tuple[range, bool]] = []
    start = end = -1  # the run being found, and where it may end (before a model content): -1 when none
    calls = ended_calls = False  # whether it holds a call content, so far and up to ``end``
    expected: tuple[list[Any], ...] = ()  # the parts lists of the user contents that must come next (a sealed call's)
    for at, content in enumerate(contents):
        role = content.get("role", USER) if type(content) is dict else None
        parts = content.get("parts") if role is not None else None
        if expected:
            if parts is expected[0] and role == USER:
                expected = expected[1:]
                continue
            expected, inert = (), False  # the call content before is not inert after all: the run ends before it
        else:
            model = role == MODEL and type(parts) is list
            if model and start >= 0:
                end, ended_calls = at, calls  # the run so far may end before this model content
            inert = False
            if (model or role == USER) and type(parts) is list and parts:
                inner = CALL if model else RESPONSE
                first = None  # its first call part (a model content's), or response part
                for part in parts:
                    if type(part) is dict and type(part.get(inner)) is dict:
                        first = part
                        break
                if first is None:
                    inert = True  # neither calls nor responses
                elif model and (answers := sealed.get(id(first))) is not None:
                    inert, calls, expected = True, True, answers
        if not inert:
            if start < end:
                runs.append((range(start, end), ended_calls))
            start = end = -1
            calls = False
        elif start < 0:
            start = at
    if start >= 0 and not expected:
        end, ended_calls = len(contents), calls
    if start < end:
        runs.append((range(start, end), ended_calls))
    return runs


def read(contents: list[Any], origin: dict[int, int], runs: Sequence[tuple[range, bool]] = ()) -> View:
    """The view of ``contents`` but for ``runs`` (``inert_runs``); ``origin`` (each content's position as the client
    sent it, by identity) learns every entry, so findings name the client's positions."""
    view = View(contents)
    out, position = view.entries, view.position
    unanswered = _Unanswered()
    # The pairing, as the entries are made: each call's id (its own, or a view id) declared by its entry; each
    # response's entry in the block of the latest call entry while every entry since that one is one of its responses.
    turns, results, declared = view.pairing.turns, view.pairing.results, view.pairing.declares
    turn, answered = -1, 0  # the latest call entry, and how many responses follow it directly
    ids: list[str] = []  # the ids it declares
    entry: Message
    for left_out, calls_left_out, segment in _segments(runs, len(contents)):
        if left_out:
            view.read_parts += [_LEFT_OUT] * len(left_out)
            if calls_left_out:
                unanswered = _Unanswered()  # the latest call content is one left out, every call of it answered
        opened = len(out)
        for index in segment:
            content = contents[index]
            at = origin.get(id(content), index)
            role = content.get("role", USER) if type(content) is dict else None
            parts = content.get("parts") if role in (MODEL, USER) else None
            if type(parts) is not list:
                view.read_parts.append([])
                entry = {"role": "item", "content": None, NATIVE: content}
                made = id(entry)
                origin[made], position[made] = at, index
                out.append(entry)
                continue
            view.read_parts.append(parts)
            if role == MODEL:
                calls: list[dict[str, Any]] = []
                keys: list[str] = []
                pending: list[Any] = []
                number = -1  # counted, not ``enumerate``d: an iterator made per content costs more over a long history
                for part in parts:
                    number += 1
                    call = part.get(CALL) if type(part) is dict else None  # ``function_call``, inlined: every part is read
                    if type(call) is dict:
                        key = id_of(call) or f"{VIEW_ID}contents[{at}].parts[{number}]"
                        if key in declared:
                            view.pairing.repeated = True
                        declared[key] = len(out)
                        keys.append(key)
                        calls.append(view_call(part, call, key, pending))
                        pending = []
                    else:
                        pending.append(part)
                if calls:
                    unanswered = _Unanswered(calls)
                    if turn >= 0:
                        turns.append((turn, turn + 1 + answered, ids))
                    turn, answered, ids = len(out), 0, keys
                    entry = {"role": "assistant", "content": pending or None, NATIVE: content, "tool_calls": calls}
                else:
                    entry = {"role": "assistant", "content": pending or None, NATIVE: content, LEAD: True}
                made = id(entry)
                origin[made], position[made] = at, index
                out.append(entry)
                continue
            run: list[Any] | None = None
            first = len(out)
            number = -1
            for part in parts:
                number += 1
                response = part.get(RESPONSE) if type(part) is dict else None  # ``function_response``, inlined
                if type(response) is dict:
                    name = response.get("name")  # ``name_of`` and ``id_of``, inlined: every response is read
                    if type(name) is not str or not name:
                        name = None
                    sent = response.get("id")
                    if type(sent) is str and sent and sent in declared:
                        key = sent  # how most responses answer: by their call's id
                        unanswered.taken.add(key)
                    else:  # the first unanswered call of its name in the latest call content, else its own id (an orphan)
                        sent = sent if type(sent) is str and sent else None
                        key = unanswered.answer(name, sent is not None) or sent or f"{VIEW_ID}contents[{at}].parts[{number}].response"
                    entry = {"role": "tool", "content": response.get("response"), "tool_call_id": key, NATIVE: part, READ: key}
                    if name is not None:
                        entry["name"] = name
                    block = turn if len(out) == turn + 1 + answered else -1
                    results.append((len(out), key, block))
                    if block >= 0:
                        answered += 1
                    run = None
                elif run is None:
                    run = [part]
                    entry = {"role": "user", "content": run, NATIVE: content}
                else:
                    run.append(part)
                    continue
                made = id(entry)
                origin[made], position[made] = at, index
                out.append(entry)
            if len(out) == first:
                entry = {"role": "user", "content": [], NATIVE: content}
                made = id(entry)
                origin[made], position[made] = at, index
                out.append(entry)
        if left_out:  # written back before the first entry read after it (a model content's: it always makes one)
            view.before[id(out[opened]) if len(out) > opened else None] = left_out
    if turn >= 0:
        turns.append((turn, turn + 1 + answered, ids))
    view.pairing.tools = bool(results)  # every response's entry has an id
    view.kept.extend(out)
    return view


#: What ``View.read_parts`` holds for a content left out.
_LEFT_OUT: list[Any] = []


def _segments(runs: Sequence[tuple[range, bool]], count: int) -> Iterator[tuple[range, bool, range]]:
    """The positions of ``count`` contents to read, as ranges, each after the run left out just before it (empty for
    the first) and whether that run holds a call content; the last range is empty when the contents end with a run."""
    left_out, calls, done = range(0), False, 0
    for run, holds in runs:
        yield left_out, calls, range(done, run.start)
        left_out, calls, done = run, holds, run.stop
    yield left_out, calls, range(done, count)


class _Queues:
    """Calls by name and in order."""

    __slots__ = ("by_name", "in_order")

    def __init__(self) -> None:
        self.by_name: dict[Any, deque[str]] = {}
        self.in_order: deque[str] = deque()

    def add(self, name: Any, key: str) -> None:
        self.by_name.setdefault(name, deque()).append(key)
        self.in_order.append(key)


class _Unanswered:
    """The latest call content's calls not answered yet, by name and in order (all of them, and those without an id
    of their own): a response without an id answers the first of its name, or the first of all. The queues are made
    for the first response that does not answer by its call's id (most answer so)."""

    __slots__ = ("calls", "queues", "taken")

    def __init__(self, calls: Iterable[dict[str, Any]] = ()) -> None:
        self.calls = calls
        self.queues: tuple[_Queues, _Queues] | None = None  # (every call, those without an id of their own)
        self.taken: set[str] = set()

    def _queued(self) -> tuple[_Queues, _Queues]:
        if self.queues is None:
            every, idless = _Queues(), _Queues()
            for call in self.calls:
                every.add(call["function"]["name"], call["id"])
                if is_view_id(call["id"]):
                    idless.add(call["function"]["name"], call["id"])
            self.queues = every, idless
        return self.queues

    def answer(self, name: str | None, idless: bool) -> str | None:
        """The view id of the call a response of ``name`` answers, taken: the first unanswered one of that name, else
        the first unanswered one (GN-7: a name a bridge made up), among those without an id when ``idless``; None when
        no call is left."""
        every, without_id = self._queued()
        queues = without_id if idless else every
        for queue in (queues.by_name.get(name), queues.in_order):
            while queue:
                key = queue.popleft()
                if key not in self.taken:
                    self.taken.add(key)
                    return key
        return None


def view_turn(turn: Turn) -> Turn:
    """A remembered Gemini turn as the rules read it: its calls, each with the parts before it (thought parts, the
    signature where it came), marked as recalled, the parts after the last call with the last one. Only its first
    MAX_ENTRIES parts, all a turn keeps. A call without an id is known by its digest key."""
    calls: list[dict[str, Any]] = []
    before: list[Any] = []
    for part in islice(turn.get("parts", ()), MAX_ENTRIES):
        call = function_call(part)
        key = call_key(call) if call is not None else None
        if call is None or key is None:
            before.append(part)
            continue
        made = view_call(part, call, key, before)
        made[RECALLED] = True
        calls.append(made)
        before = []
    if before and calls:
        calls[-1][AFTER] = before
    return {"dialect": "gemini", "tool_calls": calls, "content": None, "reasoning_content": None}


def write(entries: list[Message], view: View, origin: dict[int, int]) -> list[Any]:
    """The contents of ``entries`` (the view the rules left), in its order; copies are added to ``origin``. A response
    the rules made up is written under the ``name`` TM606 gave its entry (its call's)."""
    out: list[Any] = []
    groups: list[tuple[int | None, bool | None, list[Message]]] = []  # (content position, model side or None: item, entries)
    position = view.position
    placed = view.placed
    last_at: int | None = None
    last_side: bool | None = None  # the last group's side; None before the first and after an item
    group: list[Message] = []
    for entry in entries:
        role = entry.get("role")
        if role == "item":
            groups.append((position[id(entry)], None, [entry]))
            last_side = None
            continue
        model = role == "assistant"
        at = position.get(id(entry))  # None for an entry the rules made or copied
        if last_side is model and (at == last_at or (at is None and not model and role == "tool")):
            group.append(entry)
        else:
            group = [entry]
            groups.append((at, model, group))
            last_at, last_side = at, model
    before = view.before
    for at, side, group in groups:
        if before and (run := before.pop(id(group[0]), None)) is not None:
            _put_back(run, view, out)
        written: Any
        if side is None:
            written, where = group[0][NATIVE], at
        else:
            parts = _model_parts(group) if side else _user_parts(group)
            if at is None:
                written, where = {"role": MODEL if side else USER, "parts": parts}, None
            elif len(parts) == len(read := view.read_parts[at]) and all(map(is_, parts, read)):
                written, where = view.contents[at], at
            else:
                written, where = {**view.contents[at], "parts": parts}, None
                origin[id(written)] = origin.get(id(view.contents[at]), at)
        out.append(written)
        placed.append(where)
    if (run := before.pop(None, None)) is not None:
        _put_back(run, view, out)
    # No structural rule removes a model entry, before which a run goes back: a rule that did would lose contents.
    assert not before, "a run of contents left out of the view was not written back"
    return out


def _put_back(run: range, view: View, out: list[Any]) -> None:
    """The contents of a run left out of the view, as sent, at their own positions."""
    out += view.contents[run.start:run.stop]
    view.placed += run


def _user_parts(entries: list[Message]) -> list[Any]:
    parts: list[Any] = []
    for entry in entries:
        if entry.get("role") == "user":
            parts += entry["content"]
            continue
        key = entry.get("tool_call_id")
        native = entry.get(NATIVE)
        if native is None:  # a response the rules made up for an unanswered call (GN-1)
            response: dict[str, Any] = {"name": entry.get("name"), "response": {"error": entry.get("content")}}
            if not is_view_id(key):
                response["id"] = key
            parts.append({RESPONSE: response})
            continue
        response = native[RESPONSE]
        renamed = key != entry.get(READ) and not is_view_id(key)
        answered = entry.get("content") is not response.get("response")
        named = (name := entry.get("name")) is not None and name != response.get("name")  # its call's name (TM606)
        if not (renamed or answered or named):
            parts.append(native)  # most are written as read: no dict is made for them
            continue
        changes: dict[str, Any] = {}
        if renamed:
            changes["id"] = key
        if answered:
            changes["response"] = entry.get("content")
        if named:
            changes["name"] = name
        parts.append({**native, RESPONSE: {**response, **changes}})
    return parts


def _call_part(call: dict[str, Any]) -> dict[str, Any]:
    native = call.get(NATIVE)
    key = call.get("id")
    if native is None:  # synthesized for an orphan response: nothing is known of its arguments
        function = call.get("function")
        made: dict[str, Any] = {"name": function.get("name") if type(function) is dict else None, "args": {}}
        if not is_view_id(key):
            made["id"] = key
        return {CALL: made}
    if key != call.get(READ) and not is_view_id(key):
        return {**native, CALL: {**native[CALL], "id": key}}
    return native


def _model_parts(entries: list[Message]) -> list[Any]:
    """The parts of one model content: a content read without calls keeps its parts first; then each call after the
    parts before it; then the parts after the last call. Parts that came from memory and equal one the client kept
    are left out."""
    parts: list[Any] = []
    remembered: list[Any] = []
    for entry in entries:
        lead = entry.get(LEAD) is True
        own = entry.get("content") or ()
        if lead:
            parts += own
        calls = entry.get("tool_calls")
        for call in calls if type(calls) is list else ():
            if type(call) is not dict:
                continue
            target = remembered if call.get(RECALLED) is True else parts
            target += call.get(BEFORE, ())
            target.append(_call_part(call))
            target += call.get(AFTER, ())
        if not lead:
            parts += own
    if remembered:
        kept = {_equal_as(part) for part in parts}
        parts += [part for part in remembered if _equal_as(part) not in kept]
    return parts


def _equal_as(part: Any) -> Any:
    """What tells equal parts: their JSON text with sorted keys (a set of them is looked up, not searched)."""
    try:
        return orjson.dumps(part, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return id(part)
