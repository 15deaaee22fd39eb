r"""Thinking is off (not requested, or turned off for this request by TM510) and thinking would be sent: in the
assistant message of the turn in progress (a client that switched thinking off mid-session, a model switch), or
in a turn put back from memory.

Anthropic refuses the first (AM-11: "When thinking is disabled, an `assistant` message in the final position
cannot contain `thinking`"); thinking is no use to a request without it. The thinking blocks of the final
assistant message, and those memory brought back, are removed (never edited); the client's thinking in earlier
messages is left as sent. Answers AM-11.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
"""

from typing import Any

from proxy.dialects.messages.blocks import is_thinking
from proxy.dialects.messages.rules import thinking
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM511", "thinking-disabled", ("AM-11",))


def _sent_blocks(ctx: Context) -> set[int]:
    """Identity of every block the client sent: a block that is not one came from memory."""
    sent = ctx.request.get("messages")
    return {id(block) for message in sent for block in blocks(message)} if type(sent) is list else set()


def apply(ctx: Context) -> None:
    if thinking.mode(ctx) != "disabled":
        return
    current = thinking.current_assistant(ctx.messages)
    final = current[0] if current is not None else -1
    # Only a turn put back from memory can bring thinking the client did not send.
    sent = _sent_blocks(ctx) if any(finding.source == "recalled" for finding in ctx.findings) else None

    def edit(position: int, message: dict[str, Any]) -> Change | None:
        content = blocks(message)
        if message["role"] != "assistant":
            return None
        if position == final:
            dropped = [block for block in content if is_thinking(block)]
            why = "thinking is off: thinking removed from the final assistant message"
        elif sent is not None:
            dropped = [block for block in content if is_thinking(block) and id(block) not in sent]
            why = "thinking is off: the remembered turn's thinking left out"
        else:
            return None
        if not dropped:
            return None
        gone = {id(block) for block in dropped}
        return Change([block for block in content if id(block) not in gone], "removed", f"{why} ({len(dropped)} block(s))")

    # Without remembered thinking only the final message can change (rewrite would otherwise visit the pending ones).
    rewrite(ctx, RULE, edit, range(len(ctx.messages)) if sent is not None else [final] if final >= 0 else [])
