"""The fast path: does a Messages request need nothing from the rules? One pass over the blocks, like chat's.

Most requests are valid and must cost no more than parsing their body. ``inspect`` says whether any rule would
change the history, and which remembered turns the repair would consult: the calls of orphan results (AM-4),
with manual thinking the calls of a final tool turn that lacks its thinking (AM-9: memory may hold it), and the
calls of the latest assistant message when it holds signed thinking (AM-13: memory tells whether it was altered).
Results are judged by position, as Anthropic judges them: each ``tool_use`` answered by the leading
``tool_result`` blocks of the user messages right after its assistant message, once.

It also marks the messages a rule that edits one message at a time (TM502-TM509) may change, so that the repair
runs those rules over them alone (and over the messages the view rebuilt, of which ``may_change`` tells, asking each
rule's own edit: it runs on a repair only, so it need not be fused). A mark
may say more than ``broken`` (a ``tool_use`` in a user message with text input, a block without ``type`` that
carries ``index``, an empty text inside an assistant message's ``tool_result``): the check lets those requests
through, since Anthropic takes them, but a repair that runs for another reason mends them too.
"""

from dataclasses import dataclass, field
from typing import Any

from proxy.dialects.ids import all_id_characters
from proxy.dialects.messages.blocks import REDACTED_THINKING, THINKING, TOOL_RESULT
from proxy.dialects.messages.rules import (
    content_after_tool_use,
    empty_text,
    empty_thinking,
    non_object_input,
    stream_keys,
    system_message,
    thinking_not_first,
    trailing_thinking,
    unsigned_thinking,
)
from proxy.dialects.messages.view import is_message
from proxy.repair.profile import Profile

#: THINKING_TYPES as a tuple: a ``type`` that is not a string (a list) is simply not in it (a set would raise).
_THINKING = (THINKING, REDACTED_THINKING)


@dataclass(slots=True)
class Inspection:
    broken: bool
    #: Call ids whose remembered turns the repair may need.
    wanted: list[str]
    #: Positions of the messages a Messages rule that edits one message at a time (TM502-TM509) may change: the
    #: repair runs those rules over these of the client's messages only (and over the messages the view rebuilt).
    marked: set[int] = field(default_factory=set)


def inspect(body: dict[str, Any], profile: Profile) -> Inspection:
    """One pass; the block tests are written out (not the rules' predicates, called per block) to keep it as
    cheap as parsing: each names the rule whose predicate it mirrors."""
    messages = body.get("messages")
    if type(messages) is not list:
        return Inspection(False, [])
    strips_unsigned = unsigned_thinking in profile.rules
    folds_system = system_message in profile.rules
    marked: set[int] = set()
    mark = marked.add
    broken = False
    declared: set[str] = set()
    calls_made = 0  # tool_use ids met: more than ``declared`` holds when one repeats (AM-6)
    stray: list[str] = []  # results that answer no call of the assistant message just before them
    waiting: set[str] = set()  # calls of the last assistant message not yet answered
    leading = False  # still in the leading tool_result blocks after an assistant message
    last = -1  # the last assistant message
    latest_calls: list[str] = []  # its tool_use ids when it holds signed thinking (AM-13: memory tells whether it was altered)
    latest_called: list[str] = []  # its tool_use ids
    latest_usable = latest_thinks = False  # whether it starts with thinking the API takes; whether it holds any
    follows: bool | None = None  # whether tool results start the first message after it (None: no message yet)
    for position, message in enumerate(messages):
        if type(message) is not dict:
            continue  # not ours to judge: forwarded as sent
        role = message.get("role")
        content: Any = message.get("content")
        kind_of_content = type(content)
        if role == "assistant":
            if waiting:
                broken = True  # AM-1 (no user message after the calls)
                waiting.clear()
            leading = True
            if kind_of_content is str:
                if content == "":
                    broken = True  # AM-17
                    mark(position)
                last, latest_calls, follows = position, [], None
                latest_called, latest_usable, latest_thinks = [], False, False
            if kind_of_content is not list:
                continue
            last, follows = position, None
            calls = signed = thinks = False
            called: list[str] = []
            thinking_first = bool(content) and type(content[0]) is dict and content[0].get("type") in _THINKING
            usable = thinking_first  # AM-9: it starts with thinking the API takes (empty or stripped unsigned thinking it does not)
            kind = None  # the last block's type, once the loop is done (TM507)
            for block in content:
                if type(block) is not dict:
                    kind = None
                    if calls:
                        broken = True  # TM508
                        mark(position)
                    continue
                kind = block.get("type")
                if "index" in block:
                    broken = True  # TM502
                    mark(position)
                if kind == "tool_use":
                    calls = True
                    cid = block.get("id")
                    if type(cid) is str:
                        called.append(cid)  # AM-6 and TM501 judged on all of them at the end
                    if type(block.get("input")) is not dict:
                        broken = True  # TM503
                        mark(position)
                    continue
                if calls:
                    broken = True  # TM508: content after a call
                    mark(position)
                if kind == "text":
                    if block.get("text") == "":
                        broken = True  # TM504
                        mark(position)
                elif kind == "thinking":
                    thinks = True
                    signature = block.get("signature")
                    if type(signature) is str and signature:
                        signed = True  # altered_thinking.signed
                        if not thinking_first:
                            broken = True  # TM509
                            mark(position)
                        continue
                    # TM505 (empty and unsigned: a signed empty block is valid), TM506
                    dropped = block.get("thinking") == "" or strips_unsigned
                    if dropped or not thinking_first:
                        broken = True  # TM509, TM505, TM506
                        mark(position)
                        usable = usable and not (dropped and block is content[0])
                elif kind == "redacted_thinking":
                    thinks = True
                    if not thinking_first:
                        broken = True  # TM509
                        mark(position)
                elif kind == "tool_result" and empty_text.empty_inside(block):
                    mark(position)  # TM504 edits it (the check lets it through: only the repair's rules are told)
            if kind in _THINKING:
                broken = True  # TM507
                mark(position)
            if called:
                calls_made += len(called)
                declared.update(called)
                waiting = set(called)
            latest_called, latest_usable, latest_thinks = called, usable, thinks
            latest_calls = called if signed else []
            continue
        if role != "user":
            broken = broken or (folds_system and role == "system")  # TM514
            continue
        if kind_of_content is str:
            if waiting:
                broken = True  # AM-1 / AM-2: text where results belong
            if follows is None:
                follows = False  # the first message after the last assistant message: no tool results follow it
            if content == "":
                broken = True  # TM504
                mark(position)
            leading = False
            waiting.clear()
            continue
        if kind_of_content is not list:
            continue
        if follows is None and content:  # the first blocks after the last assistant message: tool results?
            follows = type(content[0]) is dict and content[0].get("type") == TOOL_RESULT
        for block in content:
            kind = block.get("type") if type(block) is dict else None
            if kind == "tool_result":
                cid = block.get("tool_use_id")
                if type(cid) is not str:
                    broken = True  # no id to pair it by (TM106)
                elif leading and cid in waiting:
                    waiting.discard(cid)
                else:
                    broken = True  # AM-2 (after other content), AM-4 (not the previous message's call), AM-5 (answered twice)
                    stray.append(cid)
                # TM501: a result answering a call has the call's id, which is declared (and matched at the end); any
                # other result is broken already
                inner = block.get("content")
                if type(inner) is list and any(empty_text.is_empty_text(part) for part in inner):
                    broken = True  # TM504
                    mark(position)
            else:
                if waiting:
                    broken = True  # AM-1 / AM-2: unanswered when the results end
                    waiting.clear()
                leading = False
                if kind == "text":
                    if block.get("text") == "":
                        broken = True  # TM504
                        mark(position)
                elif kind == "tool_use" and type(block.get("input")) is not dict:
                    mark(position)  # TM503 edits it (the check lets it through: only the repair's rules are told)
            if kind is not None:
                if "index" in block:
                    broken = True  # TM502
                    mark(position)
            elif type(block) is dict and "index" in block:
                mark(position)  # TM502 edits it (the check lets it through: only the repair's rules are told)
    # AM-1 (the history ends on unanswered calls), AM-6 (an id declared twice), TM501
    broken = broken or bool(waiting) or calls_made != len(declared) or not all_id_characters(declared)
    # Orphan results (AM-4) want their calls; a stray result of a declared call is broken, with nothing to recall.
    wanted = [cid for cid in dict.fromkeys(stray) if cid and cid not in declared] if stray else []
    wanted += latest_calls
    # AM-9 and AM-11 on the assistant message of the turn in progress: the last one, when it ends the request or tool
    # results follow it (``thinking.turn_of``). A final tool turn without usable thinking wants its calls (memory may hold it).
    if last >= 0 and (follows or last == len(messages) - 1):
        requested = body.get("thinking")  # ``thinking.requested``: the mode is the object's ``type``
        mode = requested.get("type") if type(requested) is dict else None
        if mode == "enabled":
            if follows and not latest_usable:
                broken = True  # AM-9
                wanted += latest_called
        elif mode != "adaptive":
            broken = broken or latest_thinks  # AM-11 (thinking disabled)
    return Inspection(broken, wanted, marked)


#: How each Messages rule that edits one message at a time (``rules/edit.py``) edits a message; TM506's comes apart, as
#: only some profiles run it.
_EDITS = (stream_keys.edited, non_object_input.edited, empty_text.edited, empty_thinking.edited, trailing_thinking.edited,
          content_after_tool_use.edited, thinking_not_first.edited)


def may_change(message: Any, strips_unsigned: bool) -> bool:
    """Whether a Messages rule that edits one message at a time (TM502-TM509, TM506 when ``strips_unsigned``) would
    change ``message``, each asked by its own edit: the repair asks it of the messages the view rebuilt, the check
    having judged the others. A message no rule changes as it is stays as it is, so no rule after another can either."""
    if not is_message(message):
        return False
    return any(edit(0, message) is not None for edit in _EDITS) or (strips_unsigned and unsigned_thinking.edited(0, message) is not None)
