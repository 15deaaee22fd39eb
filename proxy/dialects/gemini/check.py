"""The fast path: does a Gemini ``contents`` list need nothing from the rules? One pass, like the other dialects'.

Most requests are valid and must cost no more than parsing their body. ``inspect`` says whether any rule would
change the contents, and which remembered turns the repair would consult: the calls of orphan responses and the
calls sent without a name (by their ids), and, for a model that checks thought signatures (Gemini 3), the calls of
the current turn's steps that came without theirs (by ``keys.call_key``). A request whose only need is a signature
is broken too: sent as it is, the upstream refuses it, so TM609 looks in memory and TM610 applies the policy when
memory has nothing.

It also marks the contents a rule that edits one content at a time (TM602, TM604, TM605, TM607, TM608, TM613) may
change, so that the repair runs those rules over them alone (and over the contents the rules and the view made). A mark
may say more than ``broken`` (a call part that also holds a response): a repair that runs for another reason mends it.
And it says which call contents the contents after them answer exactly (``exact``, ``spread``), and the ids of every
other response (``loose``): the view leaves such a call turn out of what the structural rules walk
(``view.inert_runs``).
"""

from collections import Counter
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from proxy.dialects.gemini.keys import call_key
from proxy.dialects.gemini.parts import CALL, MODEL, RESPONSE, SIGNATURE, USER
from proxy.dialects.gemini.rules.empty_parts import is_empty
from proxy.dialects.gemini.rules.legacy_role import ROLES
from proxy.dialects.gemini.rules.thought_signature import signed
from proxy.dialects.gemini.target import GeminiTarget
from proxy.dialects.gemini.view import is_view_id


@dataclass(slots=True)
class Inspection:
    broken: bool = False
    #: Keys whose remembered turns the repair may need: orphan response ids, unsigned calls' keys.
    wanted: list[str] = field(default_factory=list)
    #: Positions of the contents a rule that edits one content at a time may change.
    marked: set[int] = field(default_factory=set)
    #: Positions of the call contents the next content answers exactly: a response for each call, in order, by the
    #: call's id and name, and nothing else.
    exact: list[int] = field(default_factory=list)
    #: The same answered by the contents after them together, each the next calls' responses (TM601 merges them): the
    #: call content's position and the last one's.
    spread: list[tuple[int, int]] = field(default_factory=list)
    #: When broken, the ids of the responses that answer none of these. ``exact`` and ``spread`` stay empty when a call
    #: id is declared twice, or an id is shaped like the view's own (``view.is_view_id``).
    loose: set[str] = field(default_factory=set)


def inspect(body: dict[str, Any], target: GeminiTarget, continues: bool = False) -> Inspection:
    """One pass over ``contents``. The rules' own tests are inlined (each line names the rule it mirrors): this runs on
    every request. ``continues``: whether the operator's policy continues a history that ends with the model's text
    (TM614, opt-in); when not, such a history is valid as it is."""
    found = Inspection()
    contents = body.get("contents")
    if type(contents) is not list or not contents:
        return found  # nothing to repair: an empty history is the upstream's to refuse
    takes_ids, signs = target.takes_ids, target.signs_calls
    mark = found.marked.add
    broken = False
    declared: set[str] = set()  # every call id so far
    answering: list[str] = []  # ids of responses that answer the content before them other than exactly, or none
    exact = found.exact
    opened = -1  # the position of the call content whose calls ``pending`` holds
    nameless: list[str] = []  # ids of calls without a name (memory may hold it)
    pending: list[tuple[str | None, Any]] | None = None  # the (id, name) of the calls of the content before, if a call content
    real = 0  # where the current turn starts: after the last user content that is not only responses
    unsigned: list[tuple[int, list[Any]]] = []  # the model contents whose first call part has no signature
    model_before = repeated = False
    for index, content in enumerate(contents):
        if type(content) is not dict:
            broken = broken or pending is not None  # TM104: its calls are answered by nothing
            pending, model_before = None, False
            continue
        role = content.get("role", USER)
        if type(role) is str and role in ROLES:
            broken = True  # TM605 (GN-5)
            mark(index)
            role = ROLES[role]
        parts = content.get("parts")
        if type(parts) is not list or not parts:
            if parts == [] or "parts" not in content:
                broken = True  # TM607 (GN-10)
                mark(index)
            broken = broken or pending is not None  # TM104
            pending, model_before = None, False
            continue
        calls: list[tuple[str | None, Any]] = []
        responses: list[tuple[str | None, Any]] = []
        others = 0
        signed_call = False  # whether a call part carries a signature (where Gemini puts it): no need to ask every part
        for part in parts:
            if type(part) is not dict:
                others += 1
                continue
            if (call := part.get(CALL)) is not None and type(call) is dict:
                cid = call.get("id")
                if "id" in call and not takes_ids:
                    broken = True  # TM608 (GN-9)
                    mark(index)
                if RESPONSE in part:
                    mark(index)  # TM602, TM604 take it for a response part
                if type(cid) is str and cid:
                    if cid in declared:
                        broken = repeated = True  # TM107 (GN-8)
                    declared.add(cid)
                else:
                    cid = None
                name = call.get("name")
                if cid is not None and (type(name) is not str or not name):
                    broken = True  # TM613 (GN-7)
                    mark(index)
                    nameless.append(cid)
                calls.append((cid, name if type(name) is str else None))
                if part.get(SIGNATURE) is not None:
                    signed_call = True
            elif (response := part.get(RESPONSE)) is not None and type(response) is dict:
                rid = response.get("id")
                if "id" in response and not takes_ids:
                    broken = True  # TM608 (GN-9)
                    mark(index)
                responses.append((rid if type(rid) is str and rid else None, name if type(name := response.get("name")) is str else None))
            else:
                others += 1
                if not part or (part.get("text") == "" and is_empty(part)):
                    broken = True  # TM607 (GN-10)
                    mark(index)
        if role == MODEL:
            if responses:
                mark(index)  # TM604 (GN-4)
                answering.extend(rid for rid, _ in responses if rid is not None)
            if model_before or responses or (calls and index == 0):
                broken = True  # TM603 (GN-3), TM604 (GN-4), TM611 (GN-3)
            if pending is not None:
                broken = True  # TM104: the calls before are answered by nothing
            pending, opened = calls or None, index
            if calls and signs and not (signed_call or signed(parts)):
                unsigned.append((index, parts))
            model_before = True
            continue
        model_before = False
        if role != USER:
            broken = broken or pending is not None
            pending = None
            continue  # a role no rule knows: not ours to judge
        if others and not responses:
            real = index + 1
        elif responses and (others or calls):
            mark(index)  # TM602 (GN-1): the parts beside the responses move after them
        if pending is not None:
            if not others and not calls and responses == pending:
                # each answers the call at its position, by id and name: how clients send them
                if opened == index - 1:
                    exact.append(opened)
                else:
                    found.spread.append((opened, index))
            elif not others and not calls and responses == pending[:len(responses)]:
                broken = True  # TM601 (GN-1): the next calls' responses, the others' in the contents after
                pending = pending[len(responses):]
                continue
            else:
                answering.extend(rid for rid, _ in responses if rid is not None)
                if others or not _answers(pending, responses):
                    broken = True  # TM601/TM602 (GN-1), TM101-TM104, TM606 (GN-7)
            if others:
                real = index + 1
            pending = None
        elif responses:
            broken = True  # GN-2: responses after no call content (TM101, TM102, TM601)
            answering.extend(rid for rid, _ in responses if rid is not None)
    if pending is not None:
        broken = True  # TM104: the last content's calls are answered by nothing
    elif model_before and continues:
        broken = True  # TM614 (GN-6): it ends with the model's text, which the policy continues
    found.wanted = [*(rid for rid in dict.fromkeys(answering) if rid not in declared), *nameless]
    for index, parts in unsigned:
        if index >= real:
            broken = True  # TM609, TM610 (GN-11)
            found.wanted.extend(key for part in parts if type(part) is dict and type(call := part.get(CALL)) is dict
                                and part.get(SIGNATURE) is None and (key := call_key(call)) is not None)
    found.broken = broken
    if repeated or (broken and any(map(is_view_id, chain(declared, answering)))):
        # TM107 renames calls and responses alike; an id shaped like the view's own for a call without one may meet
        # that id in the view: no call content is left out
        exact.clear()
        found.spread.clear()
    elif broken:
        found.loose = set(answering)
    return found


def _answers(calls: list[tuple[str | None, Any]], responses: list[tuple[str | None, Any]]) -> bool:
    """Whether ``responses`` answer ``calls`` as the view pairs them (by id, else by name), each one once and under its
    call's name."""
    if len(calls) != len(responses):
        return False
    by_id = {cid: name for cid, name in calls if cid is not None}
    names = Counter(name for _, name in calls)
    for rid, name in responses:
        if rid is not None and rid in by_id:
            if by_id.pop(rid) != name:
                return False
        elif rid is not None:
            return False
        names[name] -= 1
        if names[name] < 0:
            return False
    return True
