r"""Fields a closed-schema provider does not know: ``reasoning_content``, ``reasoning``, timestamps,
``index`` inside ``tool_calls``, ``name`` on a Mistral user message...

Mistral, Groq, Cerebras and Fireworks validate with ``extra=forbid`` and reject the whole request for one
unknown key; Anthropic-backed routes reject unknown keys inside tool calls. Keys outside the profile's
schema are removed (each removal is reported). Profiles ``mistral``, ``groq``, ``anthropic``.
Answers E-MI-3, MI-7, MI-8, GR-1, CE-1, FW-1, AN-6.

Bad:
    {"role": "user", "content": "Weather?", "timestamp": 1764500000}
    {"role": "assistant", "content": null, "reasoning_content": "Use the tool.", "tool_calls": [{"index": 0, "id": "a1B2c3D4e", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "a1B2c3D4e", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "a1B2c3D4e", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "a1B2c3D4e", "content": "18C"}
"""

import re
from collections.abc import Mapping
from typing import Any

from proxy.repair.context import Context
from proxy.repair.history import calls_of
from proxy.repair.rule import Rule

RULE = Rule("TM303", "closed-schema-fields", ("E-MI-3", "MI-7", "MI-8", "GR-1", "CE-1", "FW-1", "AN-6"))

Schema = Mapping[str, frozenset[str]]  # role (or "tool_call", "function") -> allowed keys
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # MI-8: a tool message name Mistral accepts


def _extra(item: Any, allowed: frozenset[str] | None) -> list[str]:
    if allowed is None or type(item) is not dict:
        return []
    return [key for key in item if key not in allowed]


def is_clean(messages: list[Any], profile: Any) -> bool:
    schema: Schema = profile.schema or {}
    for message in messages:
        if _extra(message, schema.get(message.get("role"))):
            return False
        for call in calls_of(message):
            if _extra(call, schema.get("tool_call")) or _extra(call.get("function") if type(call) is dict else None, schema.get("function")):
                return False
        if _bad_tool_name(message, schema):
            return False
    return True


def _bad_tool_name(message: dict[str, Any], schema: Schema) -> bool:
    """MI-8: where the schema allows ``name`` on tool messages, it must look like a function name."""
    if message.get("role") != "tool" or "name" not in message or "name" not in schema.get("tool", ()):
        return False
    name = message["name"]
    return type(name) is not str or TOOL_NAME.fullmatch(name) is None


def apply(ctx: Context) -> None:
    schema: Schema = ctx.profile.schema or {}
    for position, message in enumerate(ctx.messages):
        role = message.get("role")
        removed = _extra(message, schema.get(role) if type(role) is str else None)
        for key in removed:
            del message[key]
        if _bad_tool_name(message, schema):
            del message["name"]
            removed.append("name (not a valid tool name)")
        for number, call in enumerate(calls_of(message)):
            if type(call) is not dict:
                continue
            for key in _extra(call, schema.get("tool_call")):
                del call[key]
                removed.append(f"tool_calls[{number}].{key}")
            function = call.get("function")
            if type(function) is not dict:
                continue
            for key in _extra(function, schema.get("function")):
                del function[key]
                removed.append(f"tool_calls[{number}].function.{key}")
        if removed:
            ctx.report(RULE, message, "removed", f"fields outside the {ctx.profile.name} schema: {', '.join(removed)}", position)
