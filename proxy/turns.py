"""The unit the proxy remembers: one assistant turn that made tool calls.

A turn is what the upstream answered in one choice: its ``tool_calls`` exactly as sent (ids, names,
argument text and any extra fields such as Gemini's ``extra_content``), plus the turn's text and its
``reasoning_content`` (DeepSeek and Kimi need it echoed back, rule E-RC). It is a plain dict so that it
serializes with orjson unchanged into every memory backend.
"""

from typing import Any, TypedDict


class Turn(TypedDict):
    tool_calls: list[dict[str, Any]]
    content: str | None
    reasoning_content: str | None


def make_turn(
    tool_calls: list[dict[str, Any]],
    content: str | None = None,
    reasoning_content: str | None = None,
) -> Turn:
    return {"tool_calls": tool_calls, "content": content, "reasoning_content": reasoning_content}


def call_ids(turn: Turn) -> list[str]:
    """The ids a turn can be recalled by, in call order."""
    return [call["id"] for call in turn["tool_calls"] if isinstance(call.get("id"), str)]
