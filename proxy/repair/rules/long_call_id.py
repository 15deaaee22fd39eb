r"""A call id longer than 40 characters (ids from Gemini, Portkey or agent frameworks replayed to OpenAI).

OpenAI and Azure reject them. Each is replaced by a short deterministic id (``call_`` + 24 hex digits of
its SHA-256) in the call and in its result, so the same history always maps to the same ids.
Answers E-ID-40, OAI-8, AZ-2.

Bad:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "tooluse_weather_2f0c9a1e-7b3d-4c55-9e8f-0a1b2c3d4e5f", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "tooluse_weather_2f0c9a1e-7b3d-4c55-9e8f-0a1b2c3d4e5f", "content": "18C"}
Good:
    {"role": "user", "content": "Weather?"}
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_8c981d76b5b8b56de9eb8782", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    {"role": "tool", "tool_call_id": "call_8c981d76b5b8b56de9eb8782", "content": "18C"}
"""

from proxy.repair.context import Context, stable_id
from proxy.repair.history import call_id, each_call, is_tool, result_id
from proxy.repair.rule import Rule

RULE = Rule("TM208", "long-call-id", ("E-ID-40", "OAI-8", "AZ-2", "RS-14"))


def apply(ctx: Context) -> None:
    renamed: dict[str, str] = {}
    limit = ctx.profile.max_id_length
    for position, message, number, call in each_call(ctx.messages):
        cid = call_id(call)
        if cid is not None and len(cid) > limit:
            call["id"] = renamed.setdefault(cid, stable_id(cid))
            ctx.report(RULE, message, "renamed", f"tool_calls[{number}] id of {len(cid)} characters -> {call['id']}", position)
    if not renamed:
        return
    for position, message in enumerate(ctx.messages):
        rid = result_id(message) if is_tool(message) else None
        if rid is not None and rid in renamed:
            message["tool_call_id"] = renamed[rid]
            ctx.report(RULE, message, "renamed", f"tool_call_id of {len(rid)} characters renamed", position)
