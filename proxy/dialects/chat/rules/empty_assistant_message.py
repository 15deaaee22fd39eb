r"""An assistant message with neither tool calls nor content (``null``, ``""`` or ``[]``): what is left
after a framework strips the calls, or a placeholder for an aborted turn.

OpenAI (null), Mistral, xAI and Anthropic-backed routes reject it. It carries nothing, so it is removed
(an assistant message with ``audio`` or a ``refusal`` is kept). Answers S10, OAI-9, MI-6, XA-1, AN-4.

Bad:
    {"role": "user", "content": "Hi"}
    {"role": "assistant", "content": null}
    {"role": "user", "content": "Hello?"}
Good:
    {"role": "user", "content": "Hi"}
    {"role": "user", "content": "Hello?"}
"""

from proxy.repair.context import Context
from proxy.repair.history import Message, is_empty_content
from proxy.repair.rule import Rule

RULE = Rule("TM109", "empty-assistant-message", ("S10", "OAI-9", "MI-6", "XA-1", "AN-4"))


def is_empty_assistant(message: dict) -> bool:
    return (
        message.get("role") == "assistant"
        and not message.get("tool_calls")
        and "function_call" not in message
        and is_empty_content(message.get("content"))
        and not message.get("audio")
        and not message.get("refusal")
    )


def apply(ctx: Context) -> None:
    # The history is copied without them (``del`` would move every later message, for each one removed).
    kept: list[Message] = []
    for message in ctx.messages:
        if is_empty_assistant(message):
            ctx.report(RULE, message, "removed", "assistant message with no content and no tool calls removed", len(kept))
        else:
            kept.append(message)
    if len(kept) != len(ctx.messages):
        ctx.messages[:] = kept
