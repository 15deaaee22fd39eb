r"""A block that still carries ``index``, the position the streaming events gave it (clients and frameworks that
build the message from ``content_block_start`` events and keep the event's key on the block).

Anthropic's block schemas are closed (AM-18: "tool_use.index: Additional input is not allowed"). The key is
removed, and only it: it belongs to the event, never to the block, so the block is then as the server sent it
(a thinking block's signature still matches). Other unknown keys are kept: new ones (``caller``) keep appearing.
Answers AM-18.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "text", "text": "Checking.", "index": 0}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}, "index": 1}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
"""

from typing import Any

from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM502", "stream-keys", ("AM-18",))

#: Keys of a streaming event that are never part of a content block.
STREAM_KEYS = frozenset({"index"})


def has_stream_keys(block: Any) -> bool:
    return type(block) is dict and not STREAM_KEYS.isdisjoint(block)


def edited(position: int, message: dict[str, Any]) -> Change | None:
    """The message as this rule edits it (its new content, the finding), or None when it leaves it as it is."""
    content = blocks(message)
    stray = [block for block in content if has_stream_keys(block)]
    if not stray:
        return None
    cleaned = [{key: value for key, value in block.items() if key not in STREAM_KEYS} if has_stream_keys(block) else block for block in content]
    return Change(cleaned, "removed", f"streaming key index removed from {len(stray)} block(s)")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, edited)
