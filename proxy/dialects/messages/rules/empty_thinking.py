r"""A thinking block whose ``thinking`` text is empty (a history translated from a provider that streamed no
reasoning text, a client that kept the block's skeleton).

Anthropic refuses it (AM-16: "each thinking block must contain thinking"). The block carries no reasoning and
cannot be completed, so it is removed; a message left with nothing is removed too. Answers AM-16.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": "c2ln"}, {"type": "text", "text": "18C in Paris."}]}
    {"role": "user", "content": "Thanks."}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "text", "text": "18C in Paris."}]}
    {"role": "user", "content": "Thanks."}
"""

from typing import Any

from proxy.dialects.messages.blocks import THINKING, block_type
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM505", "empty-thinking", ("AM-16",))


def is_empty_thinking(block: Any) -> bool:
    return block_type(block) == THINKING and block.get("thinking") == ""


def _edit(position: int, message: dict[str, Any]) -> Change | None:
    content = blocks(message)
    if message["role"] != "assistant" or not any(is_empty_thinking(block) for block in content):
        return None
    kept = [block for block in content if not is_empty_thinking(block)]
    return Change(kept, "removed", f"{len(content) - len(kept)} empty thinking block(s) removed")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, _edit)
