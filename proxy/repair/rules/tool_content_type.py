r"""Tool message content that is not a plain string.

A plain string is the only tool-result shape every strict provider accepts (Groq, Mistral and vLLM reject
lists; OpenAI rejects null and bare objects). Text parts are joined with newlines, an object becomes its
JSON text, null becomes ``""``. Content with image or other media parts is left to TM206, which moves the
media into a user message. Answers S9, OAI-9, OAI-10, GR-2, MI-9.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": {"temp": 18, "unit": "C"}}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\":18,\"unit\":\"C\"}"}
"""

from proxy.repair.content import as_text, is_media_part
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM205", "tool-content-type", ("S9", "OAI-9", "OAI-10", "GR-2", "MI-9"))


def apply(ctx: Context) -> None:
    for position, message in enumerate(ctx.messages):
        if message.get("role") != "tool":
            continue
        content = message.get("content")
        if type(content) is str:
            continue
        if type(content) is list and any(is_media_part(part) for part in content):
            continue
        kind = "missing" if "content" not in message else type(content).__name__
        message["content"] = as_text(content)
        ctx.report(RULE, message, "converted", f"tool content ({message.get('tool_call_id')}) was {kind}, now a string", position)
