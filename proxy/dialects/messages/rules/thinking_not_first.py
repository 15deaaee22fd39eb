r"""An assistant message whose thinking is not its first block (``[text, thinking, tool_use]``): blocks merged
from two turns, a framework that writes the text before the reasoning.

Anthropic refuses it (AM-10: "If an assistant message contains any thinking blocks, the first block must be
thinking or redacted_thinking"). The first run of thinking blocks moves to the front, unchanged and in its
order (thinking is never edited: a signed block stays valid wherever it stands); what came before it follows.
Answers AM-10.

Request:
    {"thinking": {"type": "enabled", "budget_tokens": 1024}}
Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "text", "text": "Let me check."}, {"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"}, {"type": "text", "text": "Let me check."}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
"""

from typing import Any

from proxy.dialects.messages.blocks import is_thinking
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM509", "thinking-not-first", ("AM-10",))


def edited(position: int, message: dict[str, Any]) -> Change | None:
    """The message as this rule edits it (its new content, the finding), or None when it leaves it as it is."""
    content = blocks(message)
    start = next((k for k, block in enumerate(content) if is_thinking(block)), None)
    if message["role"] != "assistant" or not start:  # no thinking, or thinking first already
        return None
    end = start
    while end < len(content) and is_thinking(content[end]):
        end += 1
    return Change([*content[start:end], *content[:start], *content[end:]], "moved",
                  f"{end - start} thinking block(s) moved to the front of the message")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, edited)
