"""What the Messages rules share: walking messages block by block, and writing a changed message.

The rules run over the messages the view wrote back, where an untouched message is still the client's own
object; a rule never edits one of those in place (the request body stays as the client sent it), it replaces
it with a copy, and ``origin`` learns the copy so findings keep naming the client's positions. A message a rule
leaves without any block is removed: Anthropic refuses empty content, and there is nothing left to send.

A repair over a long history visits only the messages some rule may change: a ``Context`` that is a
``Pending`` names them (``pending``, positions in ``messages``), the plan having asked the check which of the
client's messages it flagged and screened the messages the view rebuilt. Any other context is walked whole.
"""

from collections.abc import Callable, Iterable
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


class Pending(Context):
    """A repair context that knows which messages the Messages rules may change: ``pending`` holds their
    positions in ``messages``, ascending (None: any message). ``rewrite`` and ``remove`` keep it true as messages are
    removed. ``system`` is the request's top-level ``system`` as a rule made it (TM514), None while it is as sent."""

    pending: list[int] | None = None
    system: Any = None


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


def rewrite(ctx: Context, rule: Rule, edit: Callable[[int, dict[str, Any]], Change | None], positions: Iterable[int] | None = None) -> None:
    """Apply ``edit`` to every readable message (with its position); each change is one finding. Only the
    messages at ``positions`` (ascending) are visited when given, else only the pending ones when known."""
    if positions is None and isinstance(ctx, Pending):
        positions = ctx.pending
    if positions is None:
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
        return
    messages = ctx.messages
    removed: set[int] = set()
    for position in positions:
        message = messages[position]
        if not is_message(message):
            continue
        change = edit(position, message)
        if change is None:
            continue
        if change.content:
            messages[position] = with_content(ctx, message, change.content)
            ctx.report(rule, message, change.action, change.detail, position)
        else:
            ctx.report(rule, message, "removed", f"{change.detail}; the {message['role']} message was left empty and removed", position)
            removed.add(position)
    remove(ctx, removed)


def remove(ctx: Context, removed: set[int]) -> None:
    """Remove the messages at positions ``removed``, keeping the pending positions true."""
    if removed:
        ctx.messages[:] = [message for position, message in enumerate(ctx.messages) if position not in removed]
        if isinstance(ctx, Pending) and ctx.pending is not None:
            ctx.pending = _shifted(ctx.pending, removed)


def _shifted(pending: list[int], removed: set[int]) -> list[int]:
    """The pending positions once the messages at ``removed`` are gone."""
    gone = sorted(removed)
    shifted: list[int] = []
    before = 0  # how many removed positions come before the one at hand
    for position in pending:
        while before < len(gone) and gone[before] < position:
            before += 1
        if before == len(gone) or gone[before] != position:
            shifted.append(position - before)
    return shifted
