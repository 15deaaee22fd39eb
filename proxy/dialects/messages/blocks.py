"""Small typed helpers over Anthropic Messages content blocks.

A Messages turn is a list of typed blocks rather than chat's ``content`` plus ``tool_calls``; capture, repair
and the tests all need to ask the same few questions of a block (is it a client tool call, a tool result, a
thinking block; which call does it name), so they are answered once here. Every helper takes ``object``,
because what arrives on the wire is untrusted JSON: a helper never raises, it answers False or None.
"""

from __future__ import annotations

import re
from typing import Any, Final, TypeGuard

__all__ = [
    "REDACTED_THINKING",
    "SERVER_TOOL_USE",
    "SERVER_TOOL_USE_ID_PATTERN",
    "TEXT",
    "THINKING",
    "THINKING_TYPES",
    "TOOL_RESULT",
    "TOOL_USE",
    "TOOL_USE_ID_PATTERN",
    "Block",
    "block_type",
    "content_blocks",
    "is_server_tool_result",
    "is_thinking",
    "is_tool_result",
    "is_tool_use",
    "tool_use_id_of",
]

Block = dict[str, Any]
"""One content block as parsed from JSON: its ``type`` says which of the shapes below it is."""

TEXT: Final = "text"
THINKING: Final = "thinking"
REDACTED_THINKING: Final = "redacted_thinking"
TOOL_USE: Final = "tool_use"
"""A call of a client tool: the client must answer it with a ``tool_result`` in the next user message."""
SERVER_TOOL_USE: Final = "server_tool_use"
"""A call of a server tool (web search, code execution...): the server answers it inside the same message."""
TOOL_RESULT: Final = "tool_result"
THINKING_TYPES: Final = frozenset({THINKING, REDACTED_THINKING})

TOOL_USE_ID_PATTERN: Final = re.compile(r"^[a-zA-Z0-9_-]+$")
"""What Anthropic accepts as a ``tool_use.id`` (AM-7); ids minted by other providers often break it."""
SERVER_TOOL_USE_ID_PATTERN: Final = re.compile(r"^srvtoolu_[a-zA-Z0-9_]+$")
"""What Anthropic accepts as a ``server_tool_use.id`` (AM-7)."""


def block_type(block: object) -> str | None:
    """The ``type`` of a block, or None when ``block`` is not a dict with a string ``type``."""
    if type(block) is not dict:
        return None
    value = block.get("type")
    return value if type(value) is str else None


def is_tool_use(block: object) -> TypeGuard[Block]:
    """A client ``tool_use`` block (not ``server_tool_use``: only client calls need a ``tool_result``)."""
    return block_type(block) == TOOL_USE


def is_tool_result(block: object) -> TypeGuard[Block]:
    """A client ``tool_result`` block (server tool results such as ``web_search_tool_result`` are not)."""
    return block_type(block) == TOOL_RESULT


def is_server_tool_result(block: object) -> TypeGuard[Block]:
    """A server tool's result (``web_search_tool_result``, ``code_execution_tool_result``...).

    Anthropic adds a block type per server tool, all named ``*_tool_result``; matching the suffix keeps
    tools introduced after this code was written recognised."""
    kind = block_type(block)
    return kind is not None and kind != TOOL_RESULT and kind.endswith("_tool_result")


def is_thinking(block: object) -> TypeGuard[Block]:
    """A ``thinking`` or ``redacted_thinking`` block: both obey the same ordering and no-modification rules."""
    return block_type(block) in THINKING_TYPES


def tool_use_id_of(block: object) -> str | None:
    """The client call a block belongs to: a ``tool_use``'s ``id``, a ``tool_result``'s ``tool_use_id``.

    One accessor for both sides is what pairing needs; anything else, or an id that is not a string, is None."""
    if is_tool_use(block):
        value = block.get("id")
    elif is_tool_result(block):
        value = block.get("tool_use_id")
    else:
        return None
    return value if type(value) is str else None


def content_blocks(message: object) -> list[Block]:
    """The content of a message as a list of blocks.

    A string ``content`` is shorthand for one text block, so rules that walk blocks need not handle two
    shapes. Entries that are not dicts are left out: no rule can read them. A message without usable
    content has no blocks."""
    if type(message) is not dict:
        return []
    content = message.get("content")
    if type(content) is str:
        return [{"type": TEXT, "text": content}]
    if type(content) is not list:
        return []
    return [block for block in content if type(block) is dict]
