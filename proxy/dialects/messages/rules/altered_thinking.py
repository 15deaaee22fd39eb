r"""Thinking in the latest assistant message that the client altered (whitespace normalised, re-serialised, trimmed)
while memory holds the block as the upstream sent it, with the same signature.

Anthropic refuses it (AM-13: "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be
modified"). The signature names the block the model made, so a remembered thinking block with the client's
signature is that block: it goes back in the client's block's place, byte for byte as remembered. Memory is asked by
the message's ``tool_use`` ids; thinking memory does not hold, and any other block, stays as sent. Answers AM-13.

Request:
    {"thinking": {"type": "enabled", "budget_tokens": 1024}}
Bad:
    {"role": "user", "content": [{"type": "text", "text": "What time is it in Tokyo?"}]}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "Tokyo is UTC+9. Ask the clock.", "signature": "dG9reW8"}, {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_07", "name": "clock", "input": {"tz": "Asia/Tokyo"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_07", "content": "09:00"}]}
Recalled:
    {"dialect": "messages", "ids": ["toolu_07"], "message_id": "msg_07", "blocks": [{"type": "thinking", "thinking": "Tokyo is UTC+9.\n\nAsk the clock. ", "signature": "dG9reW8"}, {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_07", "name": "clock", "input": {"tz": "Asia/Tokyo"}}]}
Good:
    {"role": "user", "content": [{"type": "text", "text": "What time is it in Tokyo?"}]}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "Tokyo is UTC+9.\n\nAsk the clock. ", "signature": "dG9reW8"}, {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_07", "name": "clock", "input": {"tz": "Asia/Tokyo"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_07", "content": "09:00"}]}
"""

from typing import Any

import orjson

from proxy.dialects.messages.blocks import THINKING, is_tool_use, tool_use_id_of
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.dialects.messages.view import is_message
from proxy.repair.context import Context, Recalled
from proxy.repair.rule import Rule
from proxy.turns import dialect_of

RULE = Rule("TM516", "altered-thinking", ("AM-13",))


def signed(block: Any) -> str | None:
    """A thinking block's signature, when it has one."""
    if type(block) is not dict or block.get("type") != THINKING:
        return None
    signature = block.get("signature")
    return signature if type(signature) is str and signature else None


def _remembered(recalled: Recalled, content: list[Any]) -> dict[str, Any]:
    """The thinking blocks memory holds for the turns of ``content``'s calls, by signature (none when ``content``
    holds no signed thinking)."""
    found: dict[str, Any] = {}
    if not any(signed(block) is not None for block in content):
        return found
    read: set[int] = set()  # each remembered turn once, however many of its calls the message holds
    for block in content:
        turn = recalled.get(cid) if is_tool_use(block) and (cid := tool_use_id_of(block)) is not None else None
        if turn is not None and id(turn) not in read and dialect_of(turn) == "messages":
            read.add(id(turn))
            found.update((signature, kept) for kept in turn.get("blocks", ()) if (signature := signed(kept)) is not None)
    return found


def _latest(messages: list[Any]) -> int | None:
    """The position of the latest assistant message."""
    return next((n for n in range(len(messages) - 1, -1, -1) if is_message(messages[n]) and messages[n]["role"] == "assistant"), None)


def altered(messages: list[Any], recalled: Recalled) -> bool:
    """Whether memory holds signed thinking of the latest assistant message that differs from the client's: what the
    repair of a request planned for this look in memory alone asks before it reads the history."""
    if not recalled:  # memory holds none of its turns: the usual answer
        return False
    latest = _latest(messages)
    content = blocks(messages[latest]) if latest is not None else []
    remembered = _remembered(recalled, content)
    return any((original := remembered.get(signed(block) or "")) is not None and block != original for block in content)


def apply(ctx: Context) -> None:
    latest = _latest(ctx.messages)
    if latest is None or not ctx.recalled:
        return

    def restore(position: int, message: dict[str, Any]) -> Change | None:
        content = blocks(message)
        remembered = _remembered(ctx.recalled, content)
        restored: list[Any] = []
        for block in content:
            original = remembered.get(signed(block) or "")
            changed = original is not None and block != original
            restored.append(orjson.loads(orjson.dumps(original)) if changed else block)  # a copy: never alias the memory
        count = sum(1 for old, new in zip(content, restored, strict=True) if old is not new)
        return Change(restored, "restored", f"{count} thinking block(s) the client altered put back as remembered") if count else None

    rewrite(ctx, RULE, restore, [latest])
