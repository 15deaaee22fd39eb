"""The fast path: does a Responses ``input`` list need nothing from the rules? One pass, like chat's.

Most requests are valid and must cost no more than parsing their body. ``inspect`` says whether any rule
would change the input, and which remembered turns the repair would consult: orphan outputs' calls, calls
carrying a server id without reasoning before them (only memory knows whether they had some, RS-4, or whether the
server issued that id, RS-8), references to messages, and the
previous response of a ``previous_response_id`` request (its unanswered calls, the items it already holds).
Requests that only need a look in memory are planned too; when memory has nothing to add, they go upstream
as the client's bytes.
"""

from dataclasses import dataclass
from typing import Any

from proxy.dialects.ids import all_id_characters
from proxy.dialects.responses.items import CALL_TYPES, OUTPUT_TYPES, call_id_of
from proxy.dialects.responses.rules import bad_item_id, dangling_reasoning
from proxy.repair.profile import Profile


@dataclass(slots=True)
class Inspection:
    """What the check found in an input that needs the rules or a look in memory."""

    broken: bool
    #: Call ids (and a previous response id) whose remembered turns the repair may need.
    wanted: list[str]
    #: Items with a server id after some reasoning: worth a look in memory (was it their own reasoning? TM405)
    #: only when the request is repaired anyway; a valid input is not made to wait for the store.
    reasoned: list[str]


_MISSING = object()
#: ``bad_item_id.PREFIX`` with its underscore, for one ``startswith`` per id.
_PREFIXES = {kind: prefix + "_" for kind, prefix in bad_item_id.PREFIX.items()}
#: What ``dangling_reasoning.produced_by_model`` says a reasoning item never produces, besides outputs and messages.
_NOT_PRODUCED = dangling_reasoning.NOT_PRODUCED


def inspect(body: dict[str, Any], profile: Profile) -> Inspection | None:
    """One pass over ``input``; None when it needs nothing (most requests). The rules' own tests are inlined (each
    line names the rule it mirrors): this runs on every request, and a call per item per test cost 1.6 times the
    parse of the body."""
    items = body.get("input")
    if type(items) is not list:
        return None  # a plain text prompt: no history
    chained = body.get("previous_response_id")  # previous.previous_id, written out
    if type(chained) is not str or not chained:
        chained = None
    wanted: list[str] = [] if chained is None else [chained]
    reasoned_ids: list[str] = []
    store_off = body.get("store") is False
    longest = profile.max_id_length
    declared: set[str] = set()
    answered: set[str] = set()
    named: list[str] = []  # the ids whose characters TM404 judges
    referenced: list[str] = []  # item_reference ids: none may repeat another id either (TM403)
    reasoned = False  # a reasoning item stands before, in the current run of what the model made (TM405)
    # The item before was reasoning: this one must be what it produced (TM406, RS-6: dangling_reasoning.produced_by_model).
    produced = False
    broken = False
    for item in items:
        try:  # of what JSON parses to, only an object has ``get``: no test of the type on the hot path
            kind = item.get("type", "message")
        except AttributeError:
            broken = broken or produced  # TM406: no item follows that reasoning
            reasoned = produced = False
            continue  # not ours to judge: forwarded as sent
        key = item.get("id", _MISSING)
        if kind == "message":  # the most common item, judged in a branch of its own
            assistant = item.get("role") == "assistant"
            if produced:
                broken = broken or not assistant  # TM406: a client's message is not what reasoning produced
                produced = False
            if key is not _MISSING:
                if type(key) is not str:
                    broken = True  # TM404 (RS-12); under store: false an id on an item that carries its content is taken
                else:
                    named.append(key)  # its characters, and whether it repeats one (TM403): all ids at once, at the end
                    if assistant:
                        broken = broken or not key.startswith("msg_")  # TM404 (RS-13), as bad_item_id.is_bad
                        if key:
                            (reasoned_ids if reasoned else wanted).append(key)  # TM405 (RS-5)
            # What the model made after a reasoning item, across messages, was made with it (TM405): a client's message
            # ends the run (dangling_reasoning.produced_by_model).
            reasoned = reasoned and assistant
            continue
        if type(kind) is not str:
            reasoned = produced = False
            continue  # not ours to judge (a ``type`` that is a list or an object), nor what reasoning produced
        if produced:
            broken = broken or kind in OUTPUT_TYPES or kind in _NOT_PRODUCED  # TM406 (RS-6)
            produced = False
        if key is not _MISSING:
            if type(key) is not str:
                broken = True  # TM404 (RS-12)
            elif kind == "item_reference":
                referenced.append(key)
                if key.startswith("msg_"):  # TM405 (RS-5): a message is recalled by its id; was its reasoning left out?
                    (reasoned_ids if reasoned else wanted).append(key)
            else:  # TM404 (RS-12, RS-13), as bad_item_id.is_bad
                named.append(key)
                if (prefix := _PREFIXES.get(kind)) is not None and not key.startswith(prefix):
                    broken = True
        if kind == "reasoning":
            reasoned = produced = True
            if store_off and not item.get("encrypted_content"):
                broken = True  # TM407
            continue
        if kind in CALL_TYPES:
            cid = item.get("call_id")  # items.call_id_of (a call's is always its call_id)
            if type(cid) is not str or not cid:
                continue
            if cid in declared or len(cid) > longest:
                broken = True  # TM107, TM208 (RS-14)
            declared.add(cid)
            if key is not _MISSING:  # TM405: only memory knows whether it had reasoning, and which (RS-4)
                (reasoned_ids if reasoned else wanted).append(cid)
            continue
        if kind in OUTPUT_TYPES:
            cid = item.get("call_id")  # items.call_id_of, written out
            if cid is None and kind == "local_shell_call_output":
                cid = key if key is not _MISSING else None
            if type(cid) is not str or not cid:
                cid = None
            if cid is None or cid in answered:
                broken = True  # TM106 (RS-15), TM108
            elif cid not in declared:
                if chained is None:
                    broken = True  # TM101/TM102 (RS-3): its call is nowhere before it
                wanted.append(cid)
            if cid is not None:
                answered.add(cid)
            reasoned = False
            continue
        # Only an item the model does not make ends the run of what it made after a reasoning item (TM405,
        # dangling_reasoning.produced_by_model, for an item that is neither message, call nor output).
        if kind == "item_reference":  # it may name reasoning (what follows was made with it), or what reasoning made
            if store_off:
                broken = True  # TM407
            reasoned = reasoned or (type(key) is str and key.startswith("rs_"))
        else:
            reasoned = reasoned and kind not in _NOT_PRODUCED
    ids = named + referenced if referenced else named
    broken = (broken or produced or not declared <= answered  # TM406 (the input ends on reasoning), TM104 (RS-1, RS-2)
              or not all_id_characters(named) or len(set(ids)) != len(ids)  # TM404, TM403 (RS-9)
              or (profile.adjacent_results and interleaved(items)))  # TM103
    return Inspection(broken, wanted, reasoned_ids) if broken or wanted else None


def interleaved(items: list[Any]) -> bool:
    """TM103 (RS-17), for the profiles that want each output right after its call's run: whether an item other than
    a call or an output (reasoning too) stands between a call and its output. Its own pass: most profiles do not ask."""
    waiting: set[str] = set()  # calls of the latest run still owed their outputs
    for item in items:
        if type(item) is not dict or type(kind := item.get("type", "message")) is not str:
            continue  # not ours to judge
        if kind in CALL_TYPES:
            if (cid := call_id_of(item)) is not None:
                waiting.add(cid)
        elif kind in OUTPUT_TYPES:
            waiting.discard(call_id_of(item))
        elif waiting:
            return True
    return False
