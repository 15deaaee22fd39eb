r"""A ``role: "system"`` message inside ``messages`` (Claude Code from 2.1.154 puts one after the user's message: an
instruction, or a directive carrying ``output_config``), sent to an Anthropic-compatible server that reads only
``user`` and ``assistant`` there: DeepSeek (``messages[1].role: unknown variant `system`, expected `user` or
`assistant```), Z.AI (422 ``Input should be 'user' or 'assistant'``), Kimi.

Every such server takes instructions in the top-level ``system``: the message's blocks are appended to it, in order
(a string ``system`` becomes its first text block), and the message is removed. A directive with no text
(``content: []``) is removed with its ``output_config``, which these servers have no place for. Profiles
``deepseek`` and ``zai`` only: Anthropic takes the message where it stands. Answers OT-1.

Request:
    {"system": "You are a coding agent."}
Bad:
    {"role": "user", "content": "Fix the failing test."}
    {"role": "system", "content": "Answer in French from now on."}
Good:
    {"role": "user", "content": "Fix the failing test."}
"""

from typing import Any

from proxy.dialects.messages.blocks import TEXT
from proxy.dialects.messages.rules.edit import Pending, remove
from proxy.repair.context import Context
from proxy.repair.profile import Profile
from proxy.repair.rule import Rule

RULE = Rule("TM514", "system-message", ("OT-1",))


def is_system(message: Any) -> bool:
    return type(message) is dict and message.get("role") == "system"


def is_clean(messages: list[Any], profile: Profile) -> bool:
    return not any(is_system(message) for message in messages)


def _blocks(content: Any) -> list[Any]:
    """A system message's content as ``system`` blocks: a string is one text block (none when empty)."""
    if type(content) is str:
        return [{"type": TEXT, "text": content}] if content else []
    return list(content) if type(content) is list else []


def _system(current: Any, folded: list[Any]) -> list[Any]:
    """The top-level ``system`` with ``folded`` appended: a string is its first text block, anything else but a list
    (or nothing) its first element, as sent."""
    if current is None or current == "":
        return folded
    if type(current) is str:
        return [{"type": TEXT, "text": current}, *folded]
    return [*current, *folded] if type(current) is list else [current, *folded]


def apply(ctx: Context) -> None:
    if not isinstance(ctx, Pending):  # only a Messages plan can send a new top-level system
        return
    folded: list[Any] = []
    removed: set[int] = set()
    for position, message in enumerate(ctx.messages):
        if not is_system(message):
            continue
        blocks = _blocks(message.get("content"))
        folded += blocks
        removed.add(position)
        directive = "; its output_config dropped" if "output_config" in message else ""
        if blocks:
            ctx.report(RULE, message, "folded", f"system message moved to the end of the top-level system ({len(blocks)} block(s)){directive}", position)
        else:
            ctx.report(RULE, message, "removed", f"system message without text removed{directive}", position)
    remove(ctx, removed)
    if folded:
        ctx.system = _system(ctx.request.get("system"), folded)
