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

Writing back groups consecutive entries of one side by the content they were read from; a made-up response joins
the response content before it. A content whose parts come back as the very objects read, in order, is the
client's own object, so an untouched content goes upstream exactly as sent. A made-up response says plainly that
the call was not executed (``{"error": <placeholder>}``); a call synthesized for an orphan has ``args: {}``; a
call from memory comes back with its parts byte for byte (its thought parts and ``thoughtSignature`` included),
after the client's own parts of that content that memory does not hold.
"""

from collections import deque
from collections.abc import Container, Iterable
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


def view_call(part: dict[str, Any], call: dict[str, Any], key: str, before: list[Any]) -> dict[str, Any]:
    """The chat-shaped call a call part stands for."""
    made: dict[str, Any] = {"id": key, "type": "function", "function": {"name": name_of(call), "arguments": "{}"},
                            NATIVE: part, READ: key}
    if before:
        made[BEFORE] = before
    return made


def read(contents: list[Any], origin: dict[int, int]) -> View:
    """The view of ``contents``; ``origin`` (each content's position as the client sent it, by identity) learns
    every entry, so findings name the client's positions."""
    view = View(contents)
    out, position = view.entries, view.position
    unanswered = _Unanswered()
    # The pairing, as the entries are made: each call's id (its own, or a view id) declared by its entry; each
    # response's entry in the block of the latest call entry while every entry since that one is one of its responses.
    turns, results, declared = view.pairing.turns, view.pairing.results, view.pairing.declares
    turn, answered = -1, 0  # the latest call entry, and how many responses follow it directly
    ids: list[str] = []  # the ids it declares
    entry: Message
    for index, content in enumerate(contents):
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
                name = name_of(response)
                key = _answering(id_of(response), name, declared, unanswered) or f"{VIEW_ID}contents[{at}].parts[{number}].response"
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
    if turn >= 0:
        turns.append((turn, turn + 1 + answered, ids))
    view.pairing.tools = bool(results)  # every response's entry has an id
    view.kept.extend(out)
    return view


def _answering(key: str | None, name: str | None, declared: Container[str], unanswered: "_Unanswered") -> str | None:
    """The id of the call a response answers: its own id when a call declared it; else the first unanswered call of
    its name (or by position) in the latest call content, one without an id of its own when the response has one
    (an id answers no other id); else its own id (an orphan, recalled by it)."""
    if key is not None and key in declared:
        unanswered.taken.add(key)
        return key
    return unanswered.answer(name, key is not None) or key


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
    for at, side, group in groups:
        if side is None:
            out.append(group[0][NATIVE])
            placed.append(at)
            continue
        model = side
        parts = _model_parts(group) if model else _user_parts(group)
        if at is None:
            made = {"role": MODEL if model else USER, "parts": parts}
            out.append(made)
            placed.append(None)
            continue
        read = view.read_parts[at]
        native = view.contents[at]
        if len(parts) == len(read) and all(map(is_, parts, read)):
            out.append(native)
            placed.append(at)
            continue
        copy = {**native, "parts": parts}
        origin[id(copy)] = origin.get(id(native), at)
        out.append(copy)
        placed.append(None)
    return out


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
        changes: dict[str, Any] = {}
        if key != entry.get(READ) and not is_view_id(key):
            changes["id"] = key
        if entry.get("content") is not response.get("response"):
            changes["response"] = entry.get("content")
        if (name := entry.get("name")) is not None and name != response.get("name"):
            changes["name"] = name  # the name of the call it answers (TM606)
        parts.append({**native, RESPONSE: {**response, **changes}} if changes else native)
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
