r"""An empty text block (``""``): tool-only assistant turns stored with an empty text, resumed sessions, empty
tool output, a message whose whole content is ``""``.

Anthropic refuses any (AM-17: "text content blocks must be non-empty"), at the top of a message and inside a
``tool_result``. The empty blocks are removed; so is a message left with nothing, and a ``tool_result`` left
without content loses its ``content`` key (it is optional). Nothing said is lost: the blocks were empty.
Answers AM-17.

Bad:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "text", "text": ""}, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "18C"}, {"type": "text", "text": ""}]}]}
    {"role": "assistant", "content": ""}
    {"role": "user", "content": "Thanks."}
Good:
    {"role": "user", "content": "Weather in Paris?"}
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}}]}
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "18C"}]}]}
    {"role": "user", "content": "Thanks."}
"""

from typing import Any

from proxy.dialects.messages.blocks import TEXT, block_type, is_tool_result
from proxy.dialects.messages.rules.edit import Change, rewrite
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM504", "empty-text", ("AM-17",))


def is_empty_text(block: Any) -> bool:
    return block_type(block) == TEXT and block.get("text") == ""


def empty_inside(block: Any) -> bool:
    """A ``tool_result`` whose content list holds an empty text block."""
    inner = block.get("content") if is_tool_result(block) else None
    return type(inner) is list and any(is_empty_text(part) for part in inner)


def _cleaned(block: Any) -> Any:
    if not empty_inside(block):
        return block
    inner = [part for part in block["content"] if not is_empty_text(part)]
    return {**block, "content": inner} if inner else {key: value for key, value in block.items() if key != "content"}


def edited(position: int, message: dict[str, Any]) -> Change | None:
    """The message as this rule edits it (its new content, the finding), or None when it leaves it as it is."""
    content = message["content"]
    if content == "":
        return Change([], "removed", "content was an empty string")
    if type(content) is not list:
        return None
    empty = sum(1 for block in content if is_empty_text(block) or empty_inside(block))
    if not empty:
        return None
    kept = [_cleaned(block) for block in content if not is_empty_text(block)]
    return Change(kept, "removed", f"{empty} empty text block(s) removed")


def apply(ctx: Context) -> None:
    rewrite(ctx, RULE, edited)
