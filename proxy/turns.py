"""The unit the proxy remembers: one whole assistant turn, exactly as the upstream sent it.

A turn is a plain dict, so that it serializes with orjson unchanged into every memory backend, tagged with
the wire protocol (``dialect``) that produced it:

- ``chat`` (Chat Completions; a turn stored without ``dialect`` is one of these): the ``tool_calls`` of one
  choice exactly as sent (ids, names, argument text, extra fields such as Gemini's ``extra_content``), the
  choice's text and its ``reasoning_content`` (DeepSeek and Kimi need it echoed back, rule E-RC), and, where the
  upstream sent one, the choice's ``reasoning_details`` list as OpenRouter sends it (Gemini 3 behind it needs it
  echoed back, rule GE-8).
- ``responses`` (the Responses API): every output item of one response in order (reasoning items with their
  ``encrypted_content``, calls of every type, messages), under ``items``, and the response's ``response_id``.
- ``messages`` (Anthropic Messages): the whole assistant ``blocks`` in order (thinking with its signature,
  redacted thinking, text, ``tool_use``), without streaming-only keys, and the message's ``message_id``.
- ``gemini`` (Gemini's native API): every part of one ``model`` content in order (``thoughtSignature`` on the part
  it came on, thought parts, ``functionCall``), under ``parts``; ``ids`` by ``proxy.dialects.gemini.keys``.

``ids`` lists what the turn is recalled by (its call ids, and the response id where there is one). A chat
turn leaves it out: its call ids are read from ``tool_calls``, as for every turn stored before dialects.
"""

from typing import Any, Literal, NotRequired, TypedDict

Dialect = Literal["chat", "responses", "messages", "gemini"]


class Turn(TypedDict):
    dialect: NotRequired[Dialect]
    ids: NotRequired[list[str]]
    # chat
    tool_calls: NotRequired[list[dict[str, Any]]]
    content: NotRequired[str | None]
    reasoning_content: NotRequired[str | None]
    reasoning_details: NotRequired[list[Any]]
    # responses
    items: NotRequired[list[dict[str, Any]]]
    response_id: NotRequired[str | None]
    # messages
    blocks: NotRequired[list[dict[str, Any]]]
    message_id: NotRequired[str | None]
    # gemini
    parts: NotRequired[list[dict[str, Any]]]


def make_turn(
    tool_calls: list[dict[str, Any]],
    content: str | None = None,
    reasoning_content: str | None = None,
    reasoning_details: list[Any] | None = None,
) -> Turn:
    """A chat turn; ``reasoning_details`` only where the upstream sent some."""
    turn: Turn = {"tool_calls": tool_calls, "content": content, "reasoning_content": reasoning_content}
    if reasoning_details is not None:
        turn["reasoning_details"] = reasoning_details
    return turn


def entry_count(turn: Turn) -> int:
    """How many entries a turn holds (chat calls, Responses items or Messages blocks), read off its list, not walked."""
    entries = turn.get("tool_calls", turn.get("items", turn.get("blocks", turn.get("parts"))))
    return len(entries) if isinstance(entries, list) else 0


def dialect_of(turn: Turn) -> Dialect:
    return turn.get("dialect", "chat")


def call_ids(turn: Turn) -> list[str]:
    """The ids a turn can be recalled by, in order: ``ids`` where the turn lists them, else its chat calls' ids."""
    ids = turn.get("ids")
    if ids is not None:
        return [key for key in ids if isinstance(key, str)]
    return [call["id"] for call in turn.get("tool_calls", ()) if isinstance(call.get("id"), str)]
