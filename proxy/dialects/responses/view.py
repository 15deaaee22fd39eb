"""A Responses ``input`` list read into the engine's neutral view, and the view written back into items.

The structural rules (``proxy/repair/rules``) read a chat-shaped history: assistant entries with
``tool_calls``, ``tool`` entries with a ``tool_call_id``, anything else by its role. Here a run of call items
(``function_call``, ``custom_tool_call``... with the reasoning items between them) becomes one assistant entry,
each output item a ``tool`` entry, every other item an entry of its own role (``item`` when it has none). Each
entry, and each call in an entry, keeps the item it stands for under ``NATIVE``, and the reasoning items that
came directly before it under ``BEFORE``: whatever the rules move, the reasoning moves with the item it
produced, and what they leave alone is written back as the very same object, so an untouched item goes
upstream exactly as the client sent it.

What the rules make up is written in the item family of the call it concerns: a placeholder result for an
unanswered ``custom_tool_call`` is a ``custom_tool_call_output``, a call synthesized for an orphan output is a
call of that output's family. A renamed id is written into a copy of the item (its ``call_id``).
"""

from collections.abc import Iterable
from itertools import islice
from typing import Any

from proxy.dialects.capture import MAX_ENTRIES
from proxy.dialects.responses.items import OUTPUT_TYPE, call_id_of, is_call, is_output
from proxy.repair.history import Message
from proxy.turns import Turn

#: Key of a view entry (or call) holding the input item it stands for. Not a key any JSON client sends.
NATIVE = "\x00item"
#: Key holding the reasoning items that came directly before that item, which travel with it.
BEFORE = "\x00before"

_CALL_TYPE_OF = {output: call for call, output in OUTPUT_TYPE.items()}


def is_reasoning(item: Any) -> bool:
    return type(item) is dict and item.get("type") == "reasoning"


def view_call(item: dict[str, Any], before: list[Any]) -> dict[str, Any]:
    """The chat-shaped call a call item stands for: its ``call_id`` and name, and the item itself."""
    call: dict[str, Any] = {"id": call_id_of(item), "type": "function",
                            "function": {"name": item.get("name") if type(item.get("name")) is str else item.get("type"), "arguments": "{}"},
                            NATIVE: item}
    if before:
        call[BEFORE] = before
    return call


def read(items: list[Any], opaque_outputs: frozenset[str] = frozenset(), adjacent: bool = False) -> tuple[list[Message], dict[int, int]]:
    """The view of ``items`` and where each entry and item came from: for each (by identity), its index in
    ``items`` (an entry's is that of its first item), so findings name the client's positions.

    Outputs whose ``call_id`` is in ``opaque_outputs`` answer calls the server holds (a
    ``previous_response_id`` request): they are kept as plain items, never taken for orphans. Where outputs must
    follow their calls directly (``adjacent``), a reasoning item starts a turn of its own: each run of reasoning
    and calls gets its outputs right after it, and no reasoning stands between a call and its output (RS-17)."""
    view: list[Message] = []
    origin: dict[int, int] = {}
    before: list[Any] = []
    start = 0  # index of the first item of the entry being read (its leading reasoning included)
    for index, item in enumerate(items):
        origin[id(item)] = index
        if not before:
            start = index
        if is_reasoning(item):
            before.append(item)
            continue
        previous = view[-1] if view else None
        if is_call(item):
            call = view_call(item, before)
            if previous is not None and NATIVE not in previous and type(previous.get("tool_calls")) is list and not (adjacent and before):
                previous["tool_calls"].append(call)  # parallel calls of one turn
                before = []
                continue
            entry: Message = {"role": "assistant", "content": None, "tool_calls": [call]}
        elif is_output(item) and call_id_of(item) not in opaque_outputs:
            entry = {"role": "tool", "content": item.get("output"), NATIVE: item}
            if (cid := call_id_of(item)) is not None:
                entry["tool_call_id"] = cid
            if before:  # an output the client stored out of place: the reasoning belongs to what comes after it
                origin[id(entry)] = index
                view.append(entry)
                continue
        else:
            role = item.get("role") if type(item) is dict else None
            entry = {"role": role if type(role) is str else "item", "content": "", NATIVE: item}
        if before and NATIVE in entry:
            entry[BEFORE] = before
        before = []
        origin[id(entry)] = start
        view.append(entry)
    if before:  # reasoning with nothing after it: an entry of its own (RS-6 decides)
        entry = {"role": "item", "content": "", NATIVE: before[0]}
        if len(before) > 1:
            entry[BEFORE], entry[NATIVE] = before[:-1], before[-1]
        origin[id(entry)] = start
        view.append(entry)
    return view, origin


def write(view: Iterable[Message], origin: dict[int, int]) -> list[Any]:
    """The input items of ``view``, in its order; copies made for changed items are added to ``origin``."""
    view = list(view)
    call_types = {call["id"]: call[NATIVE].get("type") for entry in view for call in _calls(entry) if NATIVE in call}
    output_types = {entry["tool_call_id"]: entry[NATIVE].get("type") for entry in view
                    if entry.get("role") == "tool" and NATIVE in entry and "tool_call_id" in entry}
    items: list[Any] = []
    for entry in view:
        native = entry.get(NATIVE)
        if native is not None:
            items.extend(entry.get(BEFORE, ()))
            items.append(_entry_item(entry, native, call_types, origin))
        elif entry.get("role") == "tool":  # a result the rules made up for an unanswered call
            cid = entry.get("tool_call_id")
            items.append({"type": OUTPUT_TYPE.get(call_types.get(cid, ""), "function_call_output"), "call_id": cid, "output": entry.get("content")})
        for call in _calls(entry):
            items.extend(call.get(BEFORE, ()))
            items.append(_call_item(call, output_types, origin))
    return items


def marks(item: dict[str, Any]) -> set[str]:
    """What identifies a reasoning item in an input: its id, and its encrypted content (``store: false`` has no ids)."""
    return {value for value in (item.get("id"), item.get("encrypted_content")) if type(value) is str and value}


def view_turn(turn: Turn, held: frozenset[str] = frozenset()) -> Turn:
    """A remembered Responses turn as the rules read it: its calls, each with the reasoning that came before it. Only
    its first MAX_ENTRIES items, all a turn keeps: a store may hold one remembered before that bound.

    Reasoning that produced a message and then calls (a preamble, then parallel calls) travels with the first of
    those calls too, since the server wants it before each of them (RS-4), unless the input holds it already (by
    ``held``: the ``marks`` of the input's reasoning items), where the client kept it with the message."""
    calls: list[dict[str, Any]] = []
    before: list[Any] = []
    for item in islice(turn.get("items", ()), MAX_ENTRIES):
        if is_reasoning(item):
            before.append(item)
        elif is_call(item):
            calls.append(view_call(item, before))
            before = []
        elif before:
            before = [reasoning for reasoning in before if not marks(reasoning) & held]
    return {"dialect": "responses", "tool_calls": calls, "content": None, "reasoning_content": None}


def _calls(entry: Message) -> list[dict[str, Any]]:
    calls = entry.get("tool_calls")
    return [call for call in calls if type(call) is dict] if type(calls) is list else []


def _entry_item(entry: Message, native: Any, call_types: dict[Any, Any], origin: dict[int, int]) -> Any:
    if entry.get("role") != "tool":
        return native
    changes: dict[str, Any] = {}
    if entry.get("tool_call_id") != call_id_of(native):
        changes["call_id"] = entry.get("tool_call_id")
    if entry.get("content") is not native.get("output"):
        changes["output"] = entry.get("content")
    return _changed(native, changes, origin)


def _call_item(call: dict[str, Any], output_types: dict[Any, Any], origin: dict[int, int]) -> Any:
    native = call.get(NATIVE)
    if native is None:  # synthesized for an orphan output: a call of that output's family
        kind = _CALL_TYPE_OF.get(output_types.get(call.get("id"), ""), "function_call")
        name = call["function"]["name"] if type(call.get("function")) is dict else None
        made: dict[str, Any] = {"type": kind, "call_id": call.get("id"), "name": name}
        if kind == "function_call":
            made["arguments"] = "{}"
        elif kind == "custom_tool_call":
            made["input"] = ""
        return made
    if call.get("id") != call_id_of(native):
        return _changed(native, {"call_id": call.get("id")}, origin)
    return native


def _changed(native: dict[str, Any], changes: dict[str, Any], origin: dict[int, int]) -> dict[str, Any]:
    if not changes:
        return native
    copy = {**native, **changes}
    if id(native) in origin:
        origin[id(copy)] = origin[id(native)]
    return copy
