r"""A system message after the first message (Claude Code's mid-conversation instructions, translated to chat),
sent to a server whose chat template takes a system message only first: vLLM and SGLang with Qwen's and other
templates answer ``System message must be at the beginning.``

Its content is appended, in order, to the first message when that is a system message (one text: joined with a blank
line; parts: concatenated), else it becomes a system message put first; the message is removed. Profile ``vllm``:
OpenAI and most others take a system message anywhere. Answers OT-1.

Bad:
    {"role": "system", "content": "You are a coding agent."}
    {"role": "user", "content": "Fix the failing test."}
    {"role": "system", "content": "Answer in French from now on."}
Good:
    {"role": "system", "content": "You are a coding agent.\n\nAnswer in French from now on."}
    {"role": "user", "content": "Fix the failing test."}
"""

from itertools import islice
from typing import Any

from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM311", "system-not-first", ("OT-1",))


def _is_system(message: Any) -> bool:
    return type(message) is dict and message.get("role") == "system"


def is_clean(messages: list[Any], profile: Any) -> bool:
    return not any(_is_system(message) for message in islice(messages, 1, None))


def _joined(first: Any, then: Any) -> Any:
    """Two system contents as one: texts joined with a blank line, else their parts in order (a text is one part)."""
    if then is None or then == "" or then == []:
        return first
    if first is None or first == "" or first == []:
        return then
    if type(first) is str and type(then) is str:
        return f"{first}\n\n{then}"
    return [*_parts(first), *_parts(then)]


def _parts(content: Any) -> list[Any]:
    return list(content) if type(content) is list else [{"type": "text", "text": content}]


def apply(ctx: Context) -> None:
    messages = ctx.messages
    if not messages or is_clean(messages, ctx.profile):
        return
    first = messages[0] if _is_system(messages[0]) else None
    kept: list[Any] = []
    for position, message in enumerate(messages):
        if position == 0 or not _is_system(message):
            kept.append(message)
            continue
        if first is None:
            first = message
            kept.insert(0, message)
            ctx.report(RULE, message, "moved", "system message moved to the front", position)
            continue
        first["content"] = _joined(first.get("content"), message.get("content"))
        ctx.report(RULE, message, "folded", "system message folded into the first one", position)
    messages[:] = kept
