"""The fast path: does a Responses ``input`` list need nothing from the rules? One pass, like chat's.

Most requests are valid and must cost no more than parsing their body. ``inspect`` says whether any rule
would change the input, and which remembered turns the repair would consult: orphan outputs' calls, calls
carrying a server id without reasoning before them (only memory knows whether they had some, RS-4), and the
previous response of a ``previous_response_id`` request (its unanswered calls, the items it already holds).
Requests that only need a look in memory are planned too; when memory has nothing to add, they go upstream
as the client's bytes.
"""

from dataclasses import dataclass, field
from typing import Any

from proxy.dialects.responses.items import call_id_of, is_call, is_output
from proxy.dialects.responses.rules import bad_item_id, dangling_reasoning, reasoning_required, unstored_ids
from proxy.dialects.responses.rules.previous import previous_id
from proxy.repair.profiles import Profile


@dataclass(slots=True)
class Inspection:
    broken: bool = False
    #: Call ids (and a previous response id) whose remembered turns the repair may need.
    wanted: list[str] = field(default_factory=list)


def inspect(body: dict[str, Any], profile: Profile) -> Inspection:
    found = Inspection()
    items = body.get("input")
    if type(items) is not list:
        return found  # a plain text prompt: no history
    chained = previous_id(body)
    if chained is not None:
        found.wanted.append(chained)
    store_off = body.get("store") is False
    declared: set[str] = set()
    answered: set[str] = set()
    seen_ids: set[Any] = set()
    waiting: set[str] = set()  # calls of the latest run still owed their outputs (adjacency)
    for position, item in enumerate(items):
        if type(item) is not dict:
            continue  # not ours to judge: forwarded as sent
        if "id" in item:
            key = item["id"]
            if store_off or key in seen_ids or bad_item_id.is_bad(item):
                found.broken = True  # RS-7, RS-9, RS-12/13
            seen_ids.add(key if type(key) is str else None)
        if store_off and unstored_ids.unusable(item):
            found.broken = True
        kind = item.get("type")
        if kind == "reasoning":
            if dangling_reasoning.dangling(items, position) or (waiting and profile.adjacent_results):
                found.broken = True  # RS-6; RS-17: reasoning between a call and its output
            continue
        if is_call(item):
            cid = call_id_of(item)
            if cid is None:
                continue
            if cid in declared or len(cid) > profile.max_id_length:
                found.broken = True  # duplicate call id, RS-14
            declared.add(cid)
            waiting.add(cid)
            continue
        if is_output(item):
            cid = call_id_of(item)
            if cid is None or cid in answered:
                found.broken = True  # RS-15, a second output
            elif cid not in declared:
                if chained is None:
                    found.broken = True  # RS-3: its call is nowhere before it
                found.wanted.append(cid)
            if cid is not None:
                answered.add(cid)
                waiting.discard(cid)
            continue
        if waiting and profile.adjacent_results:
            found.broken = True  # RS-17: an item between a call and its output
        waiting.clear()
    if declared - answered:
        found.broken = True  # RS-1, RS-2
    found.wanted.extend(reasoning_required.unreasoned(items))
    return found
