r"""Tool message content the provider refuses: null, a bare object, parts without a ``type``, and, for the
profiles whose providers take only a plain string (``Profile.string_tool_content``: Groq, Mistral, vLLM), an
array of text parts.

OpenAI takes a string or an array of text parts and refuses null and bare objects (OAI-9, OAI-10); Groq, Mistral
and vLLM refuse arrays too (GR-2, MI-9). Text parts are joined with newlines, an object becomes its JSON text,
null becomes ``""``; an array of text parts stays as sent where the provider takes it (Qwen Code sends its tool
results so). Content with image or other media parts is left to TM206, which moves the media into a user
message. Answers S9, OAI-9, OAI-10, GR-2, MI-9.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": {"temp": 18, "unit": "C"}}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\":18,\"unit\":\"C\"}"}
"""

from typing import Any

from proxy.repair.content import as_text, is_media_part
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM205", "tool-content-type", ("S9", "OAI-9", "OAI-10", "GR-2", "MI-9"))


def text_parts(content: Any) -> bool:
    """A non-empty array of typed, non-empty text parts: tool content OpenAI takes as sent (OAI-10). An empty
    part is joined like the rest: providers that drop empty text (TM306) would otherwise leave ``[]``."""
    return type(content) is list and bool(content) and all(
        type(part) is dict and part.get("type") == "text" and type(text := part.get("text")) is str and text for part in content)


def apply(ctx: Context) -> None:
    strings_only = ctx.profile.string_tool_content
    for position, message in enumerate(ctx.messages):
        if message.get("role") != "tool":
            continue
        content = message.get("content")
        if type(content) is str or (not strings_only and text_parts(content)):
            continue
        if type(content) is list and any(is_media_part(part) for part in content):
            continue
        kind = "missing" if "content" not in message else type(content).__name__
        message["content"] = as_text(content)
        ctx.report(RULE, message, "converted", f"tool content ({message.get('tool_call_id')}) was {kind}, now a string", position)
