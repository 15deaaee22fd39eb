r"""An assistant message that ends with thinking: a reasoning-only turn (a stream cut off after its thinking, a
Responses history ending in ``reasoning`` translated to Claude), or thinking left after the calls.

Anthropic refuses it (AM-12: "The final block in an assistant message cannot be `thinking`"). The thinking at
the end produced nothing, and text cannot be made up to follow it, so the trailing thinking blocks are removed
(measured 400 -> 200 on Claude by CLIProxyAPI PR#5322); a message left with nothing is removed too.
Answers AM-12.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "The user wants the weather.", "signature": "c2ln"}]}
    {"role": "user", "content": "Hello?"}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "user", "content": "Hello?"}
"""

from typing import Any

from proxy.dialects.messages.blocks import is_thinking
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM507", "trailing-thinking", ("AM-12",))


def edited(position: int, message: dict[str, Any]) -> Change | None:
    """The message as this rule edits it (its new content, the finding), or None when it leaves it as it is."""
    content = blocks(message)
    if message["role"] != "assistant" or not content or not is_thinking(content[-1]):
        return None
    end = len(content)
    while end and is_thinking(content[end - 1]):
        end -= 1
    return Change(content[:end], "removed", f"{len(content) - end} thinking block(s) at the end of the message removed")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, edited)
