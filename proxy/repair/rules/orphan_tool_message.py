r"""A tool result whose call is declared nowhere in the request: the client dropped the assistant
``tool_calls`` (window trimming, aborted turns, frameworks that keep only text).

Every strict provider rejects it. The calls are re-inserted exactly as the upstream sent them (same ids,
names, argument text and extra fields, in the original order), taken from the proxy's memory: one
assistant message per remembered turn, placed before its first result; when the message just before is
an assistant message without ``tool_calls`` (the client kept the text), the calls are attached to it.
When a kept assistant message still declares some calls of the turn, its missing calls are restored.
When nothing is remembered the orphan policy decides: ``synthesize`` a minimal call (name from the tool
message's ``name``, else the request's only tool, else ``unknown_tool``; arguments ``{}``), ``drop`` the
result, or ``reject`` the request. Answers S2, OAI-1, AZ-1, DS-1, QW-1, KI-1, AN-2, GE-1, VL-8; over the
Responses view RS-3 (the call comes back with the reasoning item it came with), over the Messages view AM-4
(the ``tool_use`` goes back into the assistant message before the result, thinking first).

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": "Let me check."}
    {"role": "tool", "tool_call_id": "call_Xq3", "content": "18C"}
Recalled:
    {"tool_calls": [{"id": "call_Xq3", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}], "content": null, "reasoning_content": null}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": "Let me check.", "tool_calls": [{"id": "call_Xq3", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]}
    {"role": "tool", "tool_call_id": "call_Xq3", "content": "18C"}
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from proxy.repair.context import Context
from proxy.repair.findings import listed
from proxy.repair.history import Message, call_id, calls_of, is_assistant, is_call_turn, is_tool, result_id
from proxy.repair.rule import Rule
from proxy.turns import Turn, call_ids

RULE = Rule("TM101", "orphan-tool-message", ("S2", "OAI-1", "AZ-1", "DS-1", "QW-1", "KI-1", "AN-2", "GE-1", "VL-8", "RS-3", "AM-4"))


def apply(ctx: Context) -> None:
    messages = ctx.messages
    pairing = ctx.pairing()
    declares = pairing.declares
    # Each orphan (position, tool message, its id; TM106 ran first: every tool message has one), in order.
    orphans = [(at, messages[at], rid) for at, rid, _ in pairing.results if rid not in declares]
    if not orphans:
        return
    recalled = ctx.recalled
    kept = _Holders(declares, messages)
    synthesized: set[int] = set()  # identity of assistant messages this pass made up
    declared: set[str] = set()  # ids this pass declared: a repeated result joins its call's block later (TM102, TM108)
    turn_ids: dict[int, set[str]] = {}  # identity of a remembered turn -> the ids of its calls, read once per turn
    history = _Rebuilt()
    done = 0  # the messages before this one are in ``history`` (or dropped)
    for at, message, rid in orphans:
        history.extend(messages, done, at)  # the messages between two orphans, as they are
        done = at + 1
        position = len(history.messages)
        if rid in declared:
            pass
        elif (turn := recalled.get(rid)) is not None and rid in _calls_of(turn, turn_ids):
            ids = call_ids(turn)
            declared.update(ids)
            _restore(ctx, history, message, turn, ids, kept)
        elif ctx.policy.orphans == "reject":
            ctx.reject(RULE, message, f"tool message answers call {rid}, which is neither in the request nor remembered", position)
            return
        elif ctx.policy.orphans == "drop":
            ctx.report(RULE, message, "removed", f"result of unknown call {rid} dropped (orphan policy 'drop')", position)
            continue
        else:
            declared.add(rid)
            _synthesize(ctx, history, message, synthesized)
        history.append(message)
    history.extend(messages, done, len(messages))
    kept.write()
    ctx.messages[:] = history.messages


def _calls_of(turn: Turn, read: dict[int, set[str]]) -> set[str]:
    """The ids of a remembered turn's calls, as a set made once per turn: many orphans may ask of one long turn
    (one not holding the id it was recalled by is asked again by each of its results)."""
    known = read.get(id(turn))
    if known is None:
        known = read[id(turn)] = {cid for call in turn.get("tool_calls", ()) if (cid := call_id(call)) is not None}
    return known


class _Rebuilt:
    """The history being rebuilt, one message at a time. Built anew rather than edited in place: each
    insertion or deletion in a long list moves every later message, and a history with many orphans was
    quadratic; so was looking back over a long run of tool results for the message that opened it."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._run_start = 0  # where the trailing run of tool messages begins

    def append(self, message: Message) -> None:
        if not is_tool(message):
            self._run_start = len(self.messages) + 1
        self.messages.append(message)

    def extend(self, messages: list[Message], start: int, stop: int) -> None:
        """Append ``messages[start:stop]``: what ``append`` of each would do, in one slice."""
        if start >= stop:
            return
        base = len(self.messages) - start  # where messages[k] lands is base + k
        self.messages += messages[start:stop]
        for k in range(stop - 1, start - 1, -1):  # the last message that is not a tool message ends the trailing run
            m = messages[k]
            if not (type(m) is dict and m.get("role") == "tool"):  # not history.is_tool(m)
                self._run_start = base + k + 1
                return

    def previous(self) -> Message | None:
        return self.messages[-1] if self.messages else None

    def block_opener(self) -> Message | None:
        """The message just before the trailing run of tool messages, if there is such a run."""
        start = self._run_start - 1
        return self.messages[start] if 0 <= start < len(self.messages) - 1 else None


def _restore(ctx: Context, history: _Rebuilt, orphan: Message, turn: Turn, ids_of_turn: list[str], kept: _Holders) -> None:
    """Put the remembered turn back before ``orphan``, which comes next in ``history`` (``ids_of_turn``: its
    ``call_ids``)."""
    position = len(history.messages)
    key = ids_of_turn[0]  # recalled by one of its ids: it has one
    if key in kept.restored:
        return  # an earlier result of the same turn brought it back; later rules place this one
    kept.restored.add(key)
    calls: list[dict[str, Any]] = orjson.loads(orjson.dumps(turn["tool_calls"]))  # never alias the memory
    ids = listed([call_id(call) or "?" for call in calls])
    # Kept assistant messages that still declare some of the turn's calls (one, or several when the client
    # stored the turn split apart, with other messages between the parts): the first gets the whole turn.
    turn_ids = set(ids_of_turn)
    holding = kept.holding(turn_ids)
    if holding:
        holder, parts = holding[0], holding[1:]
        # The turn's calls in the turn's order (the client's copy where it kept one), then any calls of the
        # holder the turn does not know (a later turn that reused an id): nothing declared is lost.
        copies = kept.copies(holding, turn_ids)
        kept.put_first(holder, [copies.get(call_id(call), call) for call in calls], turn_ids)
        for part in parts:  # each call is declared once (S4): the other parts keep only calls of their own
            kept.put_first(part, [], turn_ids)
        gathered = f", gathered from {len(holding)} assistant messages" if parts else ""
        missing = sum(1 for call in calls if call_id(call) not in kept.declares)  # the client kept the others
        ctx.report(RULE, orphan, "restored", f"missing calls of turn ({ids}) restored from memory{gathered}", position,
                   ("recalled", missing))
        return
    previous = history.previous()
    if is_assistant(previous) and not is_call_turn(previous):
        previous["tool_calls"] = calls
        ctx.report(RULE, orphan, "attached", f"remembered tool_calls ({ids}) attached to the preceding assistant message", position,
                   ("recalled", len(calls)))
        return
    history.append(ctx.made_for(orphan, {"role": "assistant", "content": turn.get("content"), "tool_calls": calls}))
    ctx.report(RULE, orphan, "inserted", f"assistant tool_calls ({ids}) re-inserted from memory", position, ("recalled", len(calls)))


class _Holders:
    """The client's assistant messages that declare calls, as restores give them whole turns and take calls from them.

    A message may hold calls of many remembered turns (a client that merged them); edited in place, it was copied
    once per turn, and read whole to tell whether it still declared a turn's call, which made such a history
    quadratic. Here each message's calls are counted by id and the edits kept in order, and its list is written once,
    at the end (``write``). A message left without calls loses its ``tool_calls`` at once, as later restores look."""

    def __init__(self, declares: dict[str, int], messages: list[Message]) -> None:
        #: Call id -> the position in ``messages`` (the history as it came) of the latest message that declares it.
        self.declares = declares
        self.restored: set[str] = set()  # first call id of every remembered turn already put back
        self._messages = messages
        self._edited: dict[int, _Edited] = {}

    def holding(self, turn_ids: set[str]) -> list[Message]:
        """The messages that still declare some of ``turn_ids`` as their latest declaration, in history order."""
        held: set[int] = set()  # the position of each such message in the history as it came
        messages = self._messages
        for cid in turn_ids:
            at = self.declares.get(cid)
            if at is not None and at not in held and self._state(messages[at]).declared[cid] > 0:
                held.add(at)
        return [messages[at] for at in sorted(held)]

    def copies(self, holding: list[Message], turn_ids: set[str]) -> dict[str | None, dict[str, Any]]:
        """The client's own copy of each of ``turn_ids`` these messages declare (the last one, in history order)."""
        copies: dict[str | None, dict[str, Any]] = {}
        for m in holding:
            last = self._state(m).last
            for cid in turn_ids:
                if (call := last.get(cid)) is not None:
                    copies[cid] = call
        return copies

    def put_first(self, message: Message, calls: list[dict[str, Any]], turn_ids: set[str]) -> None:
        """``message``'s calls become ``calls``, then those it had of no id in ``turn_ids``."""
        state = self._state(message)
        state.edits.append((calls, turn_ids))
        for cid in turn_ids:
            state.size -= state.declared.pop(cid, 0)
            state.last.pop(cid, None)
        state.size += len(calls)
        for call in calls:
            if (given := call_id(call)) is not None:
                state.declared[given] += 1
                state.last[given] = call
        if not state.size:
            del message["tool_calls"]  # left without calls: TM109 removes it unless it has text
            del self._edited[id(message)]  # whatever it is given later, it holds as given

    def write(self) -> None:
        """Each edited message's calls: the calls of its latest edit, then those of the one before that no later edit
        took out, ..., then its own calls that no edit took out."""
        for state in self._edited.values():
            if not state.edits:
                continue
            calls: list[Any] = []
            taken: set[str] = set()  # the ids the later edits took out
            for given, turn_ids in reversed(state.edits):
                calls += [call for call in given if call_id(call) not in taken]
                taken |= turn_ids
            calls += [call for call in state.message["tool_calls"] if call_id(call) not in taken]
            state.message["tool_calls"] = calls

    def _state(self, message: Message) -> _Edited:
        state = self._edited.get(id(message))
        if state is None:
            state = self._edited[id(message)] = _Edited(message)
        return state


class _Edited:
    """One message's calls as the restores left them: how many of each id, the last call of each id, and the edits
    (calls put first, ids taken out) still to be written into its ``tool_calls``."""

    __slots__ = ("declared", "edits", "last", "message", "size")

    def __init__(self, message: Message) -> None:
        self.message = message
        calls = calls_of(message)
        self.size = len(calls)
        self.declared: Counter[str] = Counter()
        self.last: dict[str, Any] = {}
        for call in calls:
            if (cid := call_id(call)) is not None:
                self.declared[cid] += 1
                self.last[cid] = call
        self.edits: list[tuple[list[dict[str, Any]], set[str]]] = []


def _synthesize(ctx: Context, history: _Rebuilt, orphan: Message, synthesized: set[int]) -> None:
    """Give ``orphan``, which comes next in ``history``, a minimal call."""
    position = len(history.messages)
    name = _guess_name(ctx, orphan)
    call = {"id": result_id(orphan), "type": "function", "function": {"name": name, "arguments": "{}"}}
    detail = f"nothing remembered for {call['id']}; synthesized call {name!r} with arguments {{}}"
    opener = history.block_opener()
    if opener is not None and id(opener) in synthesized:
        opener["tool_calls"].append(call)  # several orphans in a row share one synthesized turn
        ctx.report(RULE, orphan, "synthesized", detail, position, ("synthesized", 1))
        return
    previous = history.previous()
    if is_assistant(previous) and not is_call_turn(previous):
        previous["tool_calls"] = [call]
        synthesized.add(id(previous))
        ctx.report(RULE, orphan, "synthesized", detail + ", attached to the preceding assistant message", position,
                   ("synthesized", 1))
        return
    assistant = ctx.made_for(orphan, {"role": "assistant", "content": None, "tool_calls": [call]})
    synthesized.add(id(assistant))
    history.append(assistant)
    ctx.report(RULE, orphan, "synthesized", detail, position, ("synthesized", 1))


def _guess_name(ctx: Context, orphan: Message) -> str:
    name = orphan.get("name")
    if type(name) is str and name:
        return name
    tools = ctx.tool_names()
    return tools[0] if len(tools) == 1 else ctx.policy.placeholder_name
