r"""A thinking block without a signature (``signature`` missing or ``""``), sent to Anthropic: a client that
dropped the ``signature_delta``, a history carried over from chat-completions ``reasoning_content``, thinking
made by Kimi or DeepSeek, whose Anthropic endpoints sign nothing.

Anthropic refuses it (AM-15: "thinking.signature: Field required"; an empty signature is one it never minted,
AM-14). A signature cannot be made up, so the block is removed (the model's text and calls stay); a message
left with nothing is removed too. Profile ``anthropic`` only: Kimi and DeepSeek want their unsigned thinking
kept. Answers AM-15.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "The user wants the weather."}, {"type": "text", "text": "18C in Paris."}]}
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
from proxy.repair.profile import Profile
from proxy.repair.rule import Rule

RULE = Rule("TM506", "unsigned-thinking", ("AM-15",))


def is_unsigned(block: Any) -> bool:
    if block_type(block) != THINKING:
        return False
    signature = block.get("signature")
    return type(signature) is not str or not signature


def is_clean(messages: list[Any], profile: Profile) -> bool:
    return not any(is_unsigned(block) for message in messages if type(message) is dict and message.get("role") == "assistant"
                   for block in blocks(message))


def edited(position: int, message: dict[str, Any]) -> Change | None:
    """The message as this rule edits it (its new content, the finding), or None when it leaves it as it is."""
    content = blocks(message)
    if message["role"] != "assistant" or not any(is_unsigned(block) for block in content):
        return None
    kept = [block for block in content if not is_unsigned(block)]
    return Change(kept, "removed", f"{len(content) - len(kept)} unsigned thinking block(s) removed")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, edited)
