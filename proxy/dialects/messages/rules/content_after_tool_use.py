r"""An assistant message with text or other blocks after a ``tool_use`` (``[tool_use, text]``): histories
rebuilt from chat-completions turns, frameworks that append the model's closing text to the call message.

Anthropic refuses it with the unanswered-call text (AM-3: "`tool_use` ids were found without `tool_result`
blocks immediately after", recorded live on claude-haiku-4-5, 2026-05-05): the calls must end the message.
The other blocks move, in their order, before the first ``tool_use`` (opencode's repairAnthropicToolUseOrder;
splitting the message was measured to work too, but keeps an extra turn). Answers AM-3.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}, {"type": "text", "text": "I will check the weather."}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "text", "text": "I will check the weather."}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
"""

from typing import Any

from proxy.dialects.messages.blocks import is_tool_use
from proxy.dialects.messages.rules.edit import Change, blocks, rewrite
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM508", "content-after-tool-use", ("AM-3",))


def edited(position: int, message: dict[str, Any]) -> Change | None:
    """The message as this rule edits it (its new content, the finding), or None when it leaves it as it is."""
    content = blocks(message)
    first = next((k for k, block in enumerate(content) if is_tool_use(block)), None)
    if message["role"] != "assistant" or first is None:
        return None
    after = [block for block in content[first:] if not is_tool_use(block)]
    if not after:
        return None
    calls = [block for block in content[first:] if is_tool_use(block)]
    return Change([*content[:first], *after, *calls], "moved", f"{len(after)} block(s) after a tool_use moved before the calls")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, edited)
