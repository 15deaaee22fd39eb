"""What the Messages rules share: walking messages block by block, and writing a changed message.

The rules run over the messages the view wrote back, where an untouched message is still the client's own
object; a rule never edits one of those in place (the request body stays as the client sent it), it replaces
it with a copy, and ``origin`` learns the copy so findings keep naming the client's positions. A message a rule
leaves without any block is removed: Anthropic refuses empty content, and there is nothing left to send.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proxy.dialects.messages.view import is_message
from proxy.repair.context import Context
from proxy.repair.rule import Rule


@dataclass(frozen=True, slots=True)
class Change:
    """A message's new content, what was done (a finding's action) and the finding's detail."""

    content: list[Any]
    action: str
    detail: str


def blocks(message: Any) -> list[Any]:
    """The content list of a readable message (a string content has no blocks to edit); else none."""
    return message["content"] if is_message(message) and type(message["content"]) is list else []


def with_content(ctx: Context, message: dict[str, Any], content: Any) -> dict[str, Any]:
    """``message`` with ``content``: a copy when it is the client's own object, else edited in place."""
    index = ctx.origin.get(id(message))
    sent = ctx.request.get("messages")
    if index is not None and type(sent) is list and index < len(sent) and sent[index] is message:
        copy = {**message, "content": content}
        ctx.origin[id(copy)] = index
        return copy
    message["content"] = content
    return message


def rewrite(ctx: Context, rule: Rule, edit: Callable[[int, dict[str, Any]], Change | None]) -> None:
    """Apply ``edit`` to every readable message (with its position); each change is one finding."""
    kept: list[Any] = []
    for position, message in enumerate(ctx.messages):
        change = edit(position, message) if is_message(message) else None
        if change is None:
            kept.append(message)
        elif change.content:
            kept.append(with_content(ctx, message, change.content))
            ctx.report(rule, message, change.action, change.detail, position)
        else:
            ctx.report(rule, message, "removed", f"{change.detail}; the {message['role']} message was left empty and removed", position)
    ctx.messages[:] = kept
