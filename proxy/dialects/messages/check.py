"""The fast path: does a Messages request need nothing from the rules? One pass over the blocks, like chat's.

Most requests are valid and must cost no more than parsing their body. ``inspect`` says whether any rule would
change the history, and which remembered turns the repair would consult: the calls of orphan results (AM-4),
and, with manual thinking, the calls of a final tool turn that lacks its thinking (AM-9: memory may hold it).
Results are judged by position, as Anthropic judges them: each ``tool_use`` answered by the leading
``tool_result`` blocks of the user messages right after its assistant message, once.
"""

from dataclasses import dataclass, field
from typing import Any

from proxy.dialects.messages.blocks import THINKING_TYPES, TOOL_USE_ID_PATTERN, is_thinking, is_tool_use
from proxy.dialects.messages.rules import empty_text, empty_thinking, thinking, unsigned_thinking
from proxy.dialects.messages.view import blocks_of
from proxy.repair.profiles import Profile


@dataclass(slots=True)
class Inspection:
    broken: bool = False
    #: Call ids whose remembered turns the repair may need.
    wanted: list[str] = field(default_factory=list)


def inspect(body: dict[str, Any], profile: Profile) -> Inspection:
    """One pass; the block tests are written out (not the rules' predicates, called per block) to keep it as
    cheap as parsing: each names the rule whose predicate it mirrors."""
    found = Inspection()
    messages = body.get("messages")
    if type(messages) is not list:
        return found
    strips_unsigned = unsigned_thinking in profile.rules
    valid_id = TOOL_USE_ID_PATTERN.fullmatch
    broken = False
    declared: set[str] = set()
    stray: list[str] = []  # results that answer no call of the assistant message just before them
    waiting: set[str] = set()  # calls of the last assistant message not yet answered
    answered: set[str] = set()  # what the results after that message answered
    leading = False  # still in the leading tool_result blocks after an assistant message
    last = -1  # the last assistant message
    for position, message in enumerate(messages):
        if type(message) is not dict:
            continue  # not ours to judge: forwarded as sent
        role = message.get("role")
        content: Any = message.get("content")
        kind_of_content = type(content)
        if role == "assistant":
            broken = broken or bool(waiting) or content == ""  # AM-1 (no user message after the calls), AM-17
            waiting, answered, leading = set(), set(), True
            if kind_of_content is str:
                last = position
            if kind_of_content is not list:
                continue
            last = position
            calls = False
            thinking_first = bool(content) and type(content[0]) is dict and content[0].get("type") in THINKING_TYPES
            for block in content:
                if type(block) is not dict:
                    broken = broken or calls
                    continue
                kind = block.get("type")
                if "index" in block:
                    broken = True  # TM502
                if kind == "tool_use":
                    calls = True
                    cid = block.get("id")
                    if type(cid) is str:
                        if cid in declared or not valid_id(cid):
                            broken = True  # AM-6, TM501
                        declared.add(cid)
                        waiting.add(cid)
                    if type(block.get("input")) is not dict:
                        broken = True  # TM503
                    continue
                if calls:
                    broken = True  # TM508: content after a call
                if kind == "thinking":
                    signature = block.get("signature")
                    if (not thinking_first or block.get("thinking") == ""  # TM509, TM505
                            or (strips_unsigned and (type(signature) is not str or not signature))):  # TM506
                        broken = True
                elif kind == "redacted_thinking":
                    broken = broken or not thinking_first  # TM509
                elif kind == "text" and block.get("text") == "":
                    broken = True  # TM504
            if content and type(content[-1]) is dict and content[-1].get("type") in THINKING_TYPES:
                broken = True  # TM507
            continue
        if role != "user":
            continue
        if kind_of_content is str:
            broken = broken or content == "" or bool(waiting)  # TM504; AM-1 / AM-2: text where results belong
            leading = False
            waiting.clear()
            continue
        if kind_of_content is not list:
            continue
        for block in content:
            kind = block.get("type") if type(block) is dict else None
            if kind == "tool_result":
                cid = block.get("tool_use_id")
                if type(cid) is not str:
                    broken = True  # no id to pair it by (TM106)
                elif leading and cid in waiting:
                    waiting.discard(cid)
                    answered.add(cid)
                else:
                    broken = True  # AM-2 (after other content), AM-4 (not the previous message's call), AM-5 (answered twice)
                    if cid not in answered:
                        stray.append(cid)
                        answered.add(cid)
                if type(cid) is str and not valid_id(cid):
                    broken = True  # TM501
                inner = block.get("content")
                if type(inner) is list and any(empty_text.is_empty_text(part) for part in inner):
                    broken = True  # TM504
            else:
                if waiting:
                    broken = True  # AM-1 / AM-2: unanswered when the results end
                    waiting.clear()
                leading = False
                if kind == "text" and block.get("text") == "":
                    broken = True  # TM504
            if kind is not None and "index" in block:
                broken = True  # TM502
    broken = broken or bool(waiting)  # AM-1: the history ends on unanswered calls
    found.wanted = [cid for cid in dict.fromkeys(stray) if cid and cid not in declared]
    broken = _judge_thinking(body, messages, last, strips_unsigned, found) or broken
    found.broken = broken
    return found


def _judge_thinking(body: dict[str, Any], messages: list[Any], last: int, strips_unsigned: bool, found: Inspection) -> bool:
    """AM-9 and AM-11 on the assistant message of the turn in progress; wants the calls of a final tool turn
    without usable thinking (memory may hold it)."""
    mode = thinking.requested(body)
    if last < 0 or mode == "adaptive":
        return False
    current = thinking.current_assistant(messages)
    if current is None:
        return False
    content = blocks_of(messages[last])
    if mode == "disabled":
        return any(is_thinking(block) for block in content)  # AM-11
    if not current[1]:
        return False
    first = content[0] if content else None
    if is_thinking(first) and not empty_thinking.is_empty_thinking(first) and not (strips_unsigned and unsigned_thinking.is_unsigned(first)):
        return False
    found.wanted.extend(cid for block in content if is_tool_use(block) and type(cid := block.get("id")) is str)
    return True  # AM-9
