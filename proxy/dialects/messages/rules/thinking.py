"""What the thinking rules share: the request's thinking mode, and the assistant message it is judged on.

Anthropic judges thinking on the assistant message of the turn in progress: the last one, when it ends the
request (a prefill) or when the user messages after it start with a ``tool_result`` (the tool loop goes on).
With manual thinking that message must start with a thinking block (AM-9); with thinking off it may not hold
any (AM-11). A repair may turn thinking off for one request (AM-9, policy ``drop``): the rules after it judge
the request as it will be sent. So may the retry of a request whose thinking the upstream refused (TM513).
"""

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from proxy.dialects.messages.blocks import is_tool_result
from proxy.dialects.messages.view import blocks_of, is_message
from proxy.repair.context import Context
from proxy.repair.findings import Finding

Mode = Literal["enabled", "adaptive", "disabled"]

#: The action of the finding that turned thinking off for the request (rule TM510): the plan drops ``thinking``.
TURNED_OFF = "thinking-disabled"


def requested(body: Any) -> Mode:
    """``enabled`` (manual, with a budget), ``adaptive``, or ``disabled`` (absent or anything else too)."""
    thinking = body.get("thinking") if type(body) is dict or isinstance(body, Mapping) else None
    kind = thinking.get("type") if type(thinking) is dict else None
    return "enabled" if kind == "enabled" else "adaptive" if kind == "adaptive" else "disabled"


def turned_off(findings: Iterable[Finding]) -> bool:
    return any(finding.action == TURNED_OFF for finding in findings)


def sent(body: Mapping[str, Any], messages: list[Any], findings: Iterable[Finding]) -> dict[str, Any]:
    """The request body to send: ``body`` with ``messages``, without ``thinking`` when a finding turned it off for
    this request (TM510, policy ``drop``)."""
    out = {**body, "messages": messages}
    if turned_off(findings):
        out.pop("thinking", None)
    return out


def mode(ctx: Context) -> Mode:
    """The thinking mode the request will be sent with."""
    return "disabled" if turned_off(ctx.findings) else requested(ctx.request)


def current_assistant(messages: list[Any]) -> tuple[int, bool] | None:
    """The position of the assistant message of the turn in progress, and whether tool results follow it; None
    when a fresh user message ended that turn (or there is no assistant message)."""
    last = next((n for n in range(len(messages) - 1, -1, -1) if is_message(messages[n]) and messages[n]["role"] == "assistant"), None)
    return None if last is None else turn_of(messages, last)


def turn_of(messages: list[Any], last: int) -> tuple[int, bool] | None:
    """``current_assistant`` when ``last`` is known to be the position of the last assistant message the view reads."""
    if last == len(messages) - 1:
        return last, False
    for position in range(last + 1, len(messages)):  # the first block after it: a loop, as the check asks on every request
        message = messages[position]
        if is_message(message) and (content := blocks_of(message)):
            return (last, True) if is_tool_result(content[0]) else None
    return None
