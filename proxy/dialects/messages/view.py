"""An Anthropic ``messages`` list read into the engine's neutral view, and the view written back into messages.

The structural rules (``proxy/repair/rules``) read a chat-shaped history: assistant entries with
``tool_calls``, ``tool`` entries with a ``tool_call_id``, anything else by its role. Here an assistant message
is one assistant entry, with one call per ``tool_use`` block; each call carries the blocks that came before it
since the previous ``tool_use`` (``BEFORE``: its thinking, its text), so that whatever the rules move or merge,
the thinking travels with the call it produced. A user message is cut at its ``tool_result`` blocks: each one is
a ``tool`` entry, each run of other blocks a ``user`` entry. So "text before the results" (AM-2) is, in the view,
a user entry between a call turn and its results, which the shared interleaved rule (TM103) moves after them.
Server tool blocks (``server_tool_use``, ``web_search_tool_result``...) are not client calls: they stay plain
blocks. Every entry (and call) keeps what it stands for under ``NATIVE``, and ``origin`` tells the message it
came from.

Writing back groups consecutive entries of one side (assistant; user and tool) by the message they came from.
A message whose blocks come back as the very objects read, in their order, is written as the client's own
message object, so an untouched message (and the latest assistant message's thinking, AM-13) goes upstream
exactly as sent; a changed one is a copy with new ``content``. What the rules made up is written as Anthropic
blocks: a placeholder result is a ``tool_result`` with ``is_error: true`` (AM-1), a call synthesized for an
orphan a ``tool_use`` with ``input: {}``; a renamed id goes into copies of both the ``tool_use`` and its
``tool_result``. A turn recalled from memory comes back with its blocks byte for byte; attached to an assistant
message the client kept, it adds only the blocks that message lacks, with every thinking block first (AM-10).
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from operator import is_
from typing import Any

import orjson

from proxy.dialects.capture import MAX_ENTRIES
from proxy.dialects.messages.blocks import TEXT, TOOL_RESULT, TOOL_USE, is_thinking, is_tool_result, is_tool_use, tool_use_id_of
from proxy.repair.history import Message
from proxy.turns import Turn

#: Key of a view entry holding the message it stands for (a ``tool`` entry: its ``tool_result`` block; a call:
#: its ``tool_use`` block). Not a key any JSON client sends.
NATIVE = "\x00native"
#: Key of a call holding the blocks that came directly before its ``tool_use`` (thinking, text), which travel with it.
BEFORE = "\x00before"
#: Key of a call put back from memory: its blocks are the upstream's, and give way to equal blocks the client kept.
RECALLED = "\x00recalled"
#: Key of an assistant entry read from a message without ``tool_use``: its ``content`` stands before any call the
#: rules attach to it (the client kept the text, dropped the calls). Otherwise ``content`` holds the blocks after
#: the last call (AM-3), written after the calls.
LEAD = "\x00lead"

@dataclass(slots=True)
class View:
    """The entries read from one ``messages`` list, and what writing them back needs.

    ``entries`` is the list the rules edit; ``origin`` maps every entry and message (by identity) to the index
    of its message in the request. ``read_blocks`` holds, per message, its blocks as read (a string content as
    one text block), which tell an untouched message. ``kept`` holds every entry read, so that an entry a rule
    drops stays alive and its identity is never reused by one the rules make (``origin`` is keyed by identity).
    ``placed`` is what ``write`` made of it: per message written, the index of the client's message when it is
    that very object, else None (a copy, or a message the rules made)."""

    messages: list[Any]
    entries: list[Message] = field(default_factory=list)
    origin: dict[int, int] = field(default_factory=dict)
    read_blocks: list[list[Any]] = field(default_factory=list)
    kept: list[Message] = field(default_factory=list)
    placed: list[int | None] = field(default_factory=list)


def is_message(message: Any) -> bool:
    """A message the view can read: a user or assistant message whose content is a string or a list."""
    return (type(message) is dict and message.get("role") in ("user", "assistant")
            and type(message.get("content")) in (str, list))


def blocks_of(message: dict[str, Any]) -> list[Any]:
    """A readable message's content as a list: a string is one text block."""
    content = message["content"]
    return [{"type": TEXT, "text": content}] if type(content) is str else content


def view_call(block: dict[str, Any], before: list[Any]) -> dict[str, Any]:
    """The chat-shaped call a ``tool_use`` block stands for: its id and name, the block, the blocks before it."""
    cid, name = block.get("id"), block.get("name")  # tool_use_id_of, for a block known to be a tool_use
    call: dict[str, Any] = {"id": cid if type(cid) is str else None, "type": "function",
                            "function": {"name": name if type(name) is str else None, "arguments": "{}"}, NATIVE: block}
    if before:
        call[BEFORE] = before
    return call


def read(messages: list[Any]) -> View:
    """The view of ``messages``. What is not a readable message becomes an entry of its own that no rule
    pairs (role ``item``), written back as sent.

    An assistant message is one entry, or two when it calls tools and opens with thinking: that thinking opens a
    new answer of the model, so it is an entry of its own (without calls) and no rule merges the message into the
    turn before it (TM105 would join two answers' thinking in one message, which Anthropic refuses in the latest,
    AM-13). A user message is an entry per ``tool_result`` and per run of other blocks."""
    view = View(messages)
    origin, read_blocks, out = view.origin, view.read_blocks, view.entries
    entry: Message
    for index, message in enumerate(messages):
        origin[id(message)] = index
        if not is_message(message):
            read_blocks.append([])
            item: Message = {"role": "item", "content": None, NATIVE: message}
            origin[id(item)] = index
            out.append(item)
            continue
        blocks = blocks_of(message)
        read_blocks.append(blocks)
        if message["role"] == "assistant":
            opening = 0
            while opening < len(blocks) and is_thinking(blocks[opening]):
                opening += 1
            calls: list[dict[str, Any]] = []
            pending: list[Any] = []  # the blocks since the last call
            for block in islice(blocks, opening, None):
                if is_tool_use(block):
                    calls.append(view_call(block, pending))
                    pending = []
                else:
                    pending.append(block)
            if calls:
                if opening:
                    lead: Message = {"role": "assistant", "content": blocks[:opening], NATIVE: message, LEAD: True}
                    origin[id(lead)] = index
                    out.append(lead)
                entry = {"role": "assistant", "content": pending or None, NATIVE: message, "tool_calls": calls}
            else:
                entry = {"role": "assistant", "content": (blocks[:opening] + pending if opening else pending) or None, NATIVE: message, LEAD: True}
            origin[id(entry)] = index
            out.append(entry)
            continue
        run: list[Any] | None = None
        first = len(out)
        for block in blocks:
            if is_tool_result(block):
                entry = {"role": "tool", "content": block.get("content"), NATIVE: block}
                if (cid := tool_use_id_of(block)) is not None:
                    entry["tool_call_id"] = cid
                run = None
            elif run is None:
                run = [block]
                entry = {"role": "user", "content": run, NATIVE: message}
            else:
                run.append(block)
                continue
            origin[id(entry)] = index
            out.append(entry)
        if len(out) == first:
            entry = {"role": "user", "content": [], NATIVE: message}
            origin[id(entry)] = index
            out.append(entry)
    view.kept.extend(out)
    return view


def view_turn(turn: Turn) -> Turn:
    """A remembered Messages turn as the rules read it: its calls, each with the blocks that came before it (thinking
    with its signature, text), marked as recalled. Blocks after the last call (Claude sends none: AM-3) go with it.
    Only its first MAX_ENTRIES blocks, all a turn keeps: a store may hold one remembered before that bound."""
    calls: list[dict[str, Any]] = []
    before: list[Any] = []
    for block in islice(turn.get("blocks", ()), MAX_ENTRIES):
        if is_tool_use(block):
            call = view_call(block, before)
            call[RECALLED] = True
            calls.append(call)
            before = []
        else:
            before.append(block)
    if before and calls:
        calls[-1][BEFORE] = [*calls[-1].get(BEFORE, ()), *before]
    return {"dialect": "messages", "tool_calls": calls, "content": None, "reasoning_content": None}


def write(entries: Iterable[Message], view: View) -> list[Any]:
    """The messages of ``entries`` (the view the rules left), in its order; copies are added to ``view.origin``,
    and ``view.placed`` tells which are the client's own objects.

    Consecutive entries of one side (assistant; user and tool) form a run, written by ``_write_run`` from its
    segments: the entries of one message each (made-up results join the next message, first, else the last;
    made-up assistant entries are messages of their own). An unreadable message stands alone, written as sent."""
    out: list[Any] = []
    origin = view.origin
    side: str | int | None = None
    segments: list[tuple[int | None, list[Message]]] = []  # the current run's
    waiting: list[Message] = []  # made-up results, for the next message of the run
    assistant = item = False
    for entry in entries:
        role = entry.get("role")
        now = "assistant" if role == "assistant" else "user" if role == "user" or role == "tool" else id(entry)
        if now != side:
            if segments or waiting:
                _write_run(segments, waiting, assistant, view, out)
                segments, waiting = [], []
            side, assistant, item = now, role == "assistant", role == "item"
            if item:
                out.append(entry[NATIVE])
                view.placed.append(origin[id(entry)])
                continue
        if item:
            continue  # the same unreadable entry again: written once
        index = origin.get(id(entry)) if NATIVE in entry else None
        if index is None and not assistant:
            waiting.append(entry)
        elif segments and index is not None and segments[-1][0] == index:
            if waiting:
                segments[-1][1].extend(waiting)
                waiting = []
            segments[-1][1].append(entry)
        else:
            segments.append((index, [*waiting, entry] if waiting else [entry]))
            waiting = []
    if segments or waiting:
        _write_run(segments, waiting, assistant, view, out)
    return out


def _write_run(segments: list[tuple[int | None, list[Message]]], waiting: list[Message], assistant: bool, view: View, out: list[Any]) -> None:
    """The messages of one side's run of entries, onto ``out``: one per segment, or one for the whole run when a
    message's entries were scattered within it (a moved result between them)."""
    if waiting:
        if segments:
            segments[-1][1].extend(waiting)
        else:
            segments.append((None, waiting))
    if len(segments) > 1:
        indexes = [index for index, _ in segments if index is not None]
        if len(indexes) != len(set(indexes)):
            segments = [(indexes[0], [entry for _, entries in segments for entry in entries])]
    placed = view.placed
    for index, entries in segments:
        blocks = _assistant_blocks(entries) if assistant else _user_blocks(entries)
        if index is None:
            out.append({"role": "assistant" if assistant else "user", "content": blocks})
            placed.append(None)
            continue
        read = view.read_blocks[index]
        if len(blocks) == len(read) and all(map(is_, blocks, read)):
            out.append(view.messages[index])  # untouched: the client's own object
            placed.append(index)
            continue
        message = {**view.messages[index], "content": blocks}
        view.origin[id(message)] = index
        out.append(message)
        placed.append(None)


def _user_blocks(entries: list[Message]) -> list[Any]:
    """The blocks of one user message: each user entry's blocks, each ``tool`` entry's ``tool_result``."""
    blocks: list[Any] = []
    for entry in entries:
        if entry.get("role") == "user":
            blocks += entry["content"]
            continue
        native = entry.get(NATIVE)
        cid = entry.get("tool_call_id")
        if native is None:  # a result the rules made up for an unanswered call (AM-1)
            blocks.append({"type": TOOL_RESULT, "tool_use_id": cid, "content": entry.get("content"), "is_error": True})
            continue
        content = entry.get("content")
        if content is native.get("content") and type(cid) is str and cid == native.get("tool_use_id") and native.get("type") == TOOL_RESULT:
            blocks.append(native)  # as read (tool_use_id_of(native) is cid): the client's block
            continue
        changes: dict[str, Any] = {}
        if cid != tool_use_id_of(native):
            changes["tool_use_id"] = cid
        if content is not native.get("content"):
            changes["content"] = content
        blocks.append({**native, **changes} if changes else native)
    return blocks


def _call_block(call: dict[str, Any]) -> dict[str, Any]:
    native = call.get(NATIVE)
    if native is None:  # synthesized for an orphan result: nothing is known of its input
        function = call.get("function")
        name = function.get("name") if type(function) is dict else None
        return {"type": TOOL_USE, "id": call.get("id"), "name": name, "input": {}}
    if call.get("id") != tool_use_id_of(native):
        return {**native, "id": call.get("id")}
    return native


def _assistant_blocks(entries: list[Message]) -> list[Any]:
    """The blocks of one assistant message: each call after the blocks that came before it, then the blocks after
    the last call; a kept message's own blocks before the calls attached to it. With calls from memory, a block of
    theirs equal to one the client kept is left out, and thinking comes first, the calls last (AM-10, AM-3)."""
    blocks: list[Any] = []
    recalled = False  # whether a call from memory brought blocks of its own
    for entry in entries:
        lead = entry.get(LEAD) is True
        content = entry.get("content") or ()
        if lead:
            blocks += content
        calls = entry.get("tool_calls")
        if type(calls) is list:
            for call in calls:
                if type(call) is not dict:
                    continue
                before = call.get(BEFORE)
                if before:
                    blocks += before
                    recalled = recalled or call.get(RECALLED) is True
                native = call.get(NATIVE)
                # the call as read (tool_use_id_of(native) is its id): the client's block; else _call_block
                if type(native) is dict and native.get("type") == TOOL_USE and type(cid := call.get("id")) is str and native.get("id") == cid:
                    blocks.append(native)
                else:
                    blocks.append(_call_block(call))
        if not lead:
            blocks += content
    return _with_recalled(entries, blocks) if recalled else blocks


def _with_recalled(entries: list[Message], blocks: list[Any]) -> list[Any]:
    """``blocks`` of a message holding calls from memory: a block that came with them and equals one the client
    kept is left out, then thinking first, the calls last."""
    own: list[Any] = []  # the client's blocks (a made-up entry has none: its calls' blocks are all it holds)
    remembered: set[int] = set()  # identity of the blocks from memory, which may give way to the client's
    for entry in entries:
        own += entry.get("content") or ()
        calls = entry.get("tool_calls")
        for call in calls if type(calls) is list else ():
            if type(call) is dict and (before := call.get(BEFORE)):
                if call.get(RECALLED) is True:
                    remembered.update(map(id, before))
                else:
                    own += before
    kept = {_equal_as(block) for block in own if id(block) not in remembered}
    blocks = [block for block in blocks if id(block) not in remembered or _equal_as(block) not in kept]
    return ([b for b in blocks if is_thinking(b)] + [b for b in blocks if not is_thinking(b) and not is_tool_use(b)]
            + [b for b in blocks if is_tool_use(b)])


def _equal_as(block: Any) -> Any:
    """What tells equal blocks: their JSON text with sorted keys (a set of them is looked up, not searched block by
    block, which made a long message with a long remembered turn quadratic). A block nested too deep to encode
    equals no other: the request is refused as too deep to send anyway."""
    try:
        return orjson.dumps(block, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return id(block)
