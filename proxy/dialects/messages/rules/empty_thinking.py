r"""A thinking block with neither text nor signature (a history translated from a provider that streamed no
reasoning text and signed nothing, a client that kept the block's skeleton).

Anthropic refuses it (AM-16: "each thinking block must contain thinking"). The block carries no reasoning and
cannot be completed, so it is removed; a message left with nothing is removed too. A block with empty text and a
signature is valid and left alone: current models answer so when ``thinking.display`` is ``"omitted"`` (Claude
Code asks for it), and the signature carries the reasoning for the next turns. Answers AM-16.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": ""}, {"type": "text", "text": "18C in Paris."}]}
    {"role": "user", "content": "Thanks."}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "text", "text": "18C in Paris."}]}
    {"role": "user", "content": "Thanks."}
"""

from typing import Any

from proxy.dialects.messages.blocks import THINKING, block_type
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.dialects.messages.rules.unsigned_thinking import is_unsigned
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM505", "empty-thinking", ("AM-16",))


def is_empty_thinking(block: Any) -> bool:
    """Empty text and no signature (a signed block with empty text is what ``display: "omitted"`` returns)."""
    return block_type(block) == THINKING and block.get("thinking") == "" and is_unsigned(block)


def edited(position: int, message: dict[str, Any]) -> Change | None:
    """The message as this rule edits it (its new content, the finding), or None when it leaves it as it is."""
    content = blocks(message)
    if message["role"] != "assistant" or not any(is_empty_thinking(block) for block in content):
        return None
    kept = [block for block in content if not is_empty_thinking(block)]
    return Change(kept, "removed", f"{len(content) - len(kept)} empty unsigned thinking block(s) removed")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, edited)
