r"""Two tool messages answering the same call (a framework's placeholder next to the real result, a
retried tool, a replayed block).

Kimi, Mistral and LiteLLM's pre-flight check reject it. One result is kept: a real result wins over an
empty or placeholder one; identical results keep the first; two different real results are merged into
the first, joined by a blank line, so neither is lost. Answers S5, MI-3, KI-3, AM-5.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "[toolmend] No result: this tool call was not executed or its result was lost."}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
"""

from proxy.repair.content import as_parts, as_text, is_media_part
from proxy.repair.context import Context
from proxy.repair.history import Message, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM108", "duplicate-tool-result", ("S5", "MI-3", "KI-3", "AM-5"))


def apply(ctx: Context) -> None:
    first: dict[str, Message] = {}
    # The results before the first repeated one, each the first of its id (history.is_tool and result_id, written
    # out: this runs over every message, and almost always finds no repeat); the rule's work starts there.
    for at, message in enumerate(ctx.messages):
        if type(message) is dict and message.get("role") == "tool" and type(rid := message.get("tool_call_id")) is str and rid:
            if rid in first:
                position = at
                break
            first[rid] = message
    else:
        return
    while position < len(ctx.messages):
        message = ctx.messages[position]
        rid = result_id(message) if is_tool(message) else None
        if rid is None or rid not in first:
            if rid is not None:
                first[rid] = message
            position += 1
            continue
        kept = first[rid]
        if _is_placeholder(ctx, kept) and not _is_placeholder(ctx, message):
            kept["content"] = message.get("content")
            action = "replaced placeholder with the real result"
        elif _is_placeholder(ctx, message) or as_text(message.get("content")) == as_text(kept.get("content")):
            action = "removed duplicate"
        elif _has_media(kept) or _has_media(message):  # keep media as parts: TM206 moves them to a user message
            kept["content"] = as_parts(kept.get("content")) + as_parts(message.get("content"))
            action = "merged two different results"
        else:
            kept["content"] = as_text(kept.get("content")) + "\n\n" + as_text(message.get("content"))
            action = "merged two different results"
        del ctx.messages[position]
        ctx.report(RULE, message, "removed", f"second result of {rid}: {action}", position)


def _has_media(message: Message) -> bool:
    content = message.get("content")
    return type(content) is list and any(is_media_part(part) for part in content)


def _is_placeholder(ctx: Context, message: Message) -> bool:
    content = message.get("content")
    return content is None or content == "" or content == ctx.policy.placeholder
