"""A strict Anthropic Messages (``POST /v1/messages``) request validator, as a pure function.

It plays the rules AM-1 .. AM-18 and AM-21 of the Messages catalogue: every violation names its rule id,
its HTTP status and Anthropic's error text with the real positions (``messages.3.content.1``) and ids
substituted; :meth:`Violation.error_body` is the JSON envelope Anthropic answers with. Where the catalogue
gives no text (schema basics, marked BASE), the wording follows the pydantic style of the texts it does give
(``…: Field required``, ``…: Input should be a valid dictionary``) and the helper says "constructed".

Positions. Anthropic counts ``messages.N`` in the request as sent (merging consecutive same-role messages
does not renumber them), except that the one live recording of a history opening with an assistant message
(AM-3: assistant at 0, reported as ``messages.1``) reads as if an empty user turn were put in front of it.
The validator reproduces that: a history that starts with an assistant message has every position one higher.

Order (what :func:`check` reports first), like a server that validates the schema before the conversation:

    1. the body: JSON (AM-21 lone surrogates, via orjson, whose texts are Anthropic's verbatim), BASE fields;
    2. shape, in message and block order: BASE, AM-18, AM-15, AM-7, AM-8, AM-16, AM-17 (a request with a
       shape violation is not checked further, as a schema validator stops before the semantic checks);
    3. sequence, in message order: AM-6, AM-10, AM-12, AM-3 / AM-1 / AM-2 (at the assistant), AM-4, AM-5
       (at the tool result); then, for a server that asks for it (``user_first``), BASE: a first message that is
       the assistant's;
    4. thinking mode: AM-9 (manual ``type: "enabled"`` only), AM-11;
    5. signatures, given a :class:`ServerState` of what the server minted: AM-14, AM-13.

Profiles: ``anthropic`` (unsigned thinking is rejected: a missing ``signature`` is AM-15, ``""`` is a
signature the server never minted, AM-14); ``kimi`` (accepts ``signature: ""``, still requires the field);
``deepseek`` and ``zai`` (their own answers carry no ``signature``: missing or ``""`` are both accepted). Unsigned
blocks are not signature-checked; a non-empty signature must be one this server minted, in every profile.
A ``role: "system"`` message inside ``messages`` (OT-1) is refused by ``deepseek``, ``kimi`` and ``zai``; ``anthropic``
takes it after a user message, last or before an assistant message (the directive-only form, ``content: []``,
anywhere).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import orjson

from proxy.dialects.messages.blocks import (
    SERVER_TOOL_USE,
    SERVER_TOOL_USE_ID_PATTERN,
    TOOL_USE_ID_PATTERN,
    Block,
    block_type,
    content_blocks,
    is_thinking,
    is_tool_result,
    is_tool_use,
    tool_use_id_of,
)

__all__ = ["PROFILES", "Profile", "ServerState", "Violation", "check", "parse", "violations"]

Profile = Literal["anthropic", "kimi", "deepseek", "zai"]
PROFILES: tuple[Profile, ...] = get_args(Profile)

EXTENDED_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
# The keys each block type accepts in a request (anthropic-sdk-python ``types/*_block_param.py``); block
# types not listed here (images, documents, server tool results...) are not key-checked.
ALLOWED_KEYS: dict[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "cache_control", "citations"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control", "caller", "toolset_name"}),
    "server_tool_use": frozenset({"type", "id", "name", "input", "cache_control", "caller"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error", "cache_control", "toolset_name"}),
}
# Fields without which a block of that type cannot be read (BASE), in the order they are checked.
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "thinking": ("thinking",),  # a missing ``signature`` is AM-15, checked on its own
    "redacted_thinking": ("data",),
    "tool_use": ("id", "name", "input"),
    "server_tool_use": ("id", "name", "input"),
    "tool_result": ("tool_use_id",),
}


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: its id (``AM-4``, ``BASE``), Anthropic's error text, the HTTP status, and the
    offending message's index in the request (None for the body as a whole)."""

    rule: str
    message: str
    status: int = 400
    index: int | None = None

    def error_body(self, request_id: str | None = None) -> dict[str, Any]:
        """The JSON body Anthropic answers this violation with."""
        body: dict[str, Any] = {"type": "error", "error": {"type": "invalid_request_error", "message": self.message}}
        if request_id is not None:
            body["request_id"] = request_id
        return body


# --------------------------------------------------------------------------------------------------
# What the server minted (AM-13, AM-14)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Minted:
    """A thinking block as the server sent it, which answer it belongs to, and the system prompt it was made under."""

    block: Block
    answer: int
    system: bytes


def _thinking_key(block: Block) -> tuple[str, str] | None:
    """What identifies a thinking block the server minted: its signature, or a redacted block's data."""
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        return ("redacted_thinking", data) if isinstance(data, str) else None
    signature = block.get("signature")
    return ("thinking", signature) if isinstance(signature, str) and signature else None


def _system_key(system: Any) -> bytes:
    return orjson.dumps(system, option=orjson.OPT_SORT_KEYS)


class ServerState:
    """The thinking blocks a server has minted, so that a replayed one can be checked against the original.

    The upstream calls :meth:`mint` with every answer's content before sending it. ``bind_system`` plays the
    2026-09 binding variant of AM-14: a block replayed under another ``system`` prompt than the one it was
    made under is refused. Safe to share between the server thread and the test thread."""

    def __init__(self, *, bind_system: bool = False) -> None:
        self.bind_system = bind_system
        self._lock = threading.Lock()
        self._blocks: dict[tuple[str, str], Minted] = {}
        self._answers: list[list[tuple[str, str]]] = []

    def mint(self, content: Iterable[Block], system: Any = None) -> None:
        """Remember the signed thinking and redacted thinking blocks of one answer, in order."""
        with self._lock:
            answer = len(self._answers)
            keys: list[tuple[str, str]] = []
            for block in content:
                key = _thinking_key(block) if is_thinking(block) else None
                if key is not None:
                    self._blocks[key] = Minted(orjson.loads(orjson.dumps(block)), answer, _system_key(system))
                    keys.append(key)
            self._answers.append(keys)

    def lookup(self, block: Block) -> Minted | None:
        key = _thinking_key(block)
        with self._lock:
            return None if key is None else self._blocks.get(key)

    def answer_keys(self, answer: int) -> list[tuple[str, str]]:
        """The keys of one answer's thinking blocks, in the order they were sent."""
        with self._lock:
            return list(self._answers[answer])

    @property
    def minted(self) -> int:
        with self._lock:
            return len(self._blocks)


# --------------------------------------------------------------------------------------------------
# Texts
# --------------------------------------------------------------------------------------------------


def _at(n: int, shift: int) -> str:
    return f"messages.{n + shift}"


def _unanswered(rule: str, n: int, shift: int, ids: list[str]) -> Violation:
    """AM-1 / AM-2 / AM-3: one text for all three (AM-2 and AM-3 live-verified with it)."""
    return Violation(
        rule,
        f"{_at(n, shift)}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(ids)}. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        index=n,
    )


def _base(n: int | None, message: str) -> Violation:
    return Violation("BASE", message, index=n)


# --------------------------------------------------------------------------------------------------
# 1. The body
# --------------------------------------------------------------------------------------------------


def parse(raw: bytes) -> Any:
    """The parsed body, or the :class:`Violation` of a body that is not JSON.

    orjson's messages are Anthropic's verbatim (AM-21: ``no low surrogate in string: line 1 column 131554
    (char 131553)``), and orjson checks surrogates while it parses, so one pass over the raw bytes finds a
    lone surrogate at the position Anthropic reports it. Other JSON errors get the same prefix (BASE)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        rule = "AM-21" if "surrogate" in str(exc) else "BASE"
        return Violation(rule, f"The request body is not valid JSON: {exc}")


def _body(body: Any, count_tokens: bool) -> Violation | None:
    """BASE: an object with ``model``, ``max_tokens`` (not for count_tokens) and a non-empty ``messages`` list.

    ``max_tokens: Field required`` and ``messages: at least one message is required`` are Anthropic's texts
    as commonly reported; the others are constructed in the same style."""
    if not isinstance(body, dict):
        return _base(None, "Input should be a valid dictionary")
    for field in ("model",) if count_tokens else ("model", "max_tokens"):
        if field not in body:
            return _base(None, f"{field}: Field required")
    if "messages" not in body:
        return _base(None, "messages: Field required")
    messages = body["messages"]
    if not isinstance(messages, list):
        return _base(None, "messages: Input should be a valid list")
    if not messages:
        return _base(None, "messages: at least one message is required")
    return None


# --------------------------------------------------------------------------------------------------
# 2. Shape
# --------------------------------------------------------------------------------------------------


def _unsigned_ok(block: Block, profile: Profile) -> bool:
    """Whether the profile takes this thinking block without a signature check (never for ``anthropic``)."""
    if profile == "kimi":
        return block.get("signature") == ""
    if profile in ("deepseek", "zai"):
        return block.get("signature", "") == ""
    return False


def _block_shape(n: int, k: int, block: Any, shift: int, profile: Profile) -> Violation | None:
    """BASE, AM-18, AM-15, AM-7, AM-8, AM-16, AM-17 for one content block."""
    path = f"{_at(n, shift)}.content.{k}"
    if not isinstance(block, dict):
        return _base(n, f"{path}: Input should be a valid dictionary")  # constructed
    kind = block.get("type")
    if not isinstance(kind, str):
        return _base(n, f"{path}.type: Field required")  # constructed
    for field in REQUIRED_KEYS.get(kind, ()):
        if field not in block:
            return _base(n, f"{path}.{kind}.{field}: Field required")  # constructed (AM-15's form)
    allowed = ALLOWED_KEYS.get(kind)
    if allowed is not None:
        extra = next((key for key in block if key not in allowed), None)
        if extra is not None:
            return Violation("AM-18", f"{path}.{kind}.{extra}: Additional input is not allowed", index=n)
    if kind == "thinking":
        if "signature" not in block and not _unsigned_ok(block, profile):
            return Violation("AM-15", f"{path}.thinking.signature: Field required", index=n)
        if block.get("thinking") == "" and not block.get("signature"):  # signed empty text: ``display: "omitted"``
            return Violation("AM-16", f"{path}.thinking.thinking: each thinking block must contain thinking", index=n)
    elif kind in ("tool_use", SERVER_TOOL_USE):
        pattern = TOOL_USE_ID_PATTERN if kind == "tool_use" else SERVER_TOOL_USE_ID_PATTERN
        if not isinstance(block["id"], str) or not pattern.match(block["id"]):
            return Violation("AM-7", f"{path}.{kind}.id: String should match pattern '{pattern.pattern}'", index=n)
        if not isinstance(block["input"], dict):
            return Violation("AM-8", f"{path}.{kind}.input: Input should be a valid dictionary", index=n)
    elif kind == "tool_result":
        # The catalogue quotes the pattern for ``tool_use.id``; the same constraint on the id a result names is
        # inferred (repairs that scrub ids rewrite both), so this text is constructed from AM-7's.
        if not isinstance(block["tool_use_id"], str) or not TOOL_USE_ID_PATTERN.match(block["tool_use_id"]):
            return Violation("AM-7", f"{path}.tool_result.tool_use_id: String should match pattern '{TOOL_USE_ID_PATTERN.pattern}'", index=n)
        inner = block.get("content")
        if isinstance(inner, list) and any(block_type(part) == "text" and part.get("text") == "" for part in inner):
            return _am17(n)
    elif kind == "text" and block["text"] == "":
        return _am17(n)
    return None


def _am17(n: int) -> Violation:
    """AM-17: an empty text block (top level or inside a tool result). Anthropic's text names no position."""
    return Violation("AM-17", "messages: text content blocks must be non-empty", index=n)


def _system_message(n: int, messages: list[Any], shift: int, profile: Profile) -> Violation | None:
    """OT-1: a ``role: "system"`` message inside ``messages``, in each server's words (Kimi's is constructed); Anthropic
    holds it to its placement (LeenHawk/gproxy#209 for the first position, the rest constructed)."""
    at = _at(n, shift)
    if profile == "deepseek":
        return Violation("OT-1", f"Failed to deserialize the JSON body into the target type: messages[{n}].role: unknown variant "
                         "`system`, expected `user` or `assistant`", index=n)
    if profile == "zai":
        return Violation("OT-1", f"body.messages.{n}.role: Input should be 'user' or 'assistant'", status=422, index=n)
    if profile == "kimi":
        return Violation("OT-1", f"{at}.role: Input should be 'user' or 'assistant'", index=n)
    directive = messages[n].get("content") == []
    if n == 0 and not directive:
        return _base(n, f"{at}: use the top-level 'system' parameter for the initial system prompt; the directive-only form "
                     "(content: [] with output_config) is accepted at any position")
    after_user = n > 0 and isinstance(messages[n - 1], dict) and messages[n - 1].get("role") == "user"
    before_assistant = n + 1 == len(messages) or (isinstance(messages[n + 1], dict) and messages[n + 1].get("role") == "assistant")
    if not directive and not (after_user and before_assistant):
        return _base(n, f"{at}: a system message must follow a user message and be the last message or precede an assistant message")
    return None


def _message_shape(n: int, message: Any, shift: int, profile: Profile) -> Violation | None:
    """BASE for one message (constructed texts), then its blocks."""
    if not isinstance(message, dict):
        return _base(n, f"{_at(n, shift)}: Input should be a valid dictionary")
    role = message.get("role")
    if role is None:
        return _base(n, f"{_at(n, shift)}.role: Field required")
    if role not in ("user", "assistant"):
        return _base(n, f"{_at(n, shift)}.role: Input should be 'user' or 'assistant'")
    if "content" not in message:
        return _base(n, f"{_at(n, shift)}.content: Field required")
    content = message["content"]
    if isinstance(content, str):
        return _am17(n) if content == "" else None
    if not isinstance(content, list):
        return _base(n, f"{_at(n, shift)}.content: Input should be a valid list")
    for k, block in enumerate(content):
        bad = _block_shape(n, k, block, shift, profile)
        if bad is not None:
            return bad
    return None


# --------------------------------------------------------------------------------------------------
# 3. Sequence
# --------------------------------------------------------------------------------------------------


def _user_run(messages: list[dict[str, Any]], start: int) -> list[tuple[int, int, Block]]:
    """The blocks of the consecutive user messages from ``start`` (Anthropic merges them into one turn),
    each with its message index and block index."""
    run: list[tuple[int, int, Block]] = []
    n = start
    while n < len(messages) and messages[n]["role"] == "user":
        run.extend((n, k, block) for k, block in enumerate(content_blocks(messages[n])))
        n += 1
    return run


def _leading_results(run: list[tuple[int, int, Block]]) -> list[str]:
    """The ids answered by the ``tool_result`` blocks the merged user turn *starts* with (the only ones that count)."""
    ids: list[str] = []
    for _, _, block in run:
        if not is_tool_result(block):
            break
        ids.append(block["tool_use_id"])
    return ids


def _assistant(n: int, blocks: list[Block], messages: list[dict[str, Any]], shift: int) -> Violation | None:
    """AM-10, AM-12, then AM-3 / AM-1 / AM-2 for the assistant message ``n``."""
    at = _at(n, shift)
    if any(is_thinking(block) for block in blocks) and not is_thinking(blocks[0]):
        return Violation(
            "AM-10",
            f"{at}.content.0: If an assistant message contains any thinking blocks, the first block must be thinking "
            f"or redacted_thinking. Found {blocks[0]['type']}.",
            index=n,
        )
    if blocks and is_thinking(blocks[-1]):
        return Violation("AM-12", f"{at}: The final block in an assistant message cannot be `thinking`.", index=n)
    uses = [(k, block["id"]) for k, block in enumerate(blocks) if is_tool_use(block)]
    if not uses:
        return None
    last_other = max((k for k, block in enumerate(blocks) if not is_tool_use(block)), default=-1)
    followed = [call_id for k, call_id in uses if k < last_other]  # AM-3: content after the call in its own message
    run = _user_run(messages, n + 1)
    answered = set(_leading_results(run))
    later = {tool_use_id_of(block) for _, _, block in run if is_tool_result(block)}
    missing = [call_id for _, call_id in uses if call_id not in answered]
    bad = [call_id for _, call_id in uses if call_id in followed or call_id in missing]
    if not bad:
        return None
    if followed:
        rule = "AM-3"
    elif all(call_id in later for call_id in missing):
        rule = "AM-2"  # the results are there, but not at the beginning of the next turn
    else:
        rule = "AM-1"
    return _unanswered(rule, n, shift, bad)


def _sequence(messages: list[dict[str, Any]], shift: int) -> Violation | None:
    """One pass in message order: AM-6 anywhere, assistant rules at the assistant, AM-4/AM-5 at the result."""
    declared: set[str] = set()
    previous_uses: set[str] = set()  # the tool_use ids of the assistant message the current user turn follows
    seen_results: set[str] = set()
    for n, message in enumerate(messages):
        blocks = content_blocks(message)
        if message["role"] == "assistant":
            for k, block in enumerate(blocks):
                if is_tool_use(block):
                    if block["id"] in declared:
                        return Violation("AM-6", f"{_at(n, shift)}.content.{k}: tool_use ids must be unique", index=n)
                    declared.add(block["id"])
            bad = _assistant(n, blocks, messages, shift)
            if bad is not None:
                return bad
            previous_uses = {block["id"] for block in blocks if is_tool_use(block)}
            seen_results = set()
            continue
        for k, block in enumerate(blocks):
            if not is_tool_result(block):
                continue
            call_id = block["tool_use_id"]
            path = f"{_at(n, shift)}.content.{k}"
            if call_id not in previous_uses:
                return Violation(
                    "AM-4",
                    f"{path}: unexpected `tool_use_id` found in `tool_result` blocks: {call_id}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
                    index=n,
                )
            if call_id in seen_results:
                return Violation(
                    "AM-5",
                    f"{path}: each tool_use must have a single result. Found multiple `tool_result` blocks with id: {call_id}",
                    index=n,
                )
            seen_results.add(call_id)
    return None


# --------------------------------------------------------------------------------------------------
# 4. Thinking mode
# --------------------------------------------------------------------------------------------------


def _opening(messages: list[dict[str, Any]]) -> Violation | None:
    """BASE, for a server that wants the user's message first: a history whose first message is the assistant's,
    when the sequence is otherwise sound (the text reported by toolmend's users for a repaired window; the live AM-3
    recording shows Anthropic itself taking an assistant first, so only ``user_first`` asks for it)."""
    if messages[0]["role"] == "assistant":
        return _base(None, 'messages: first message must use the "user" role')
    return None


def _thinking_mode(body: dict[str, Any]) -> str:
    """``enabled`` (manual, with a budget), ``adaptive``, or ``disabled`` (absent too)."""
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    return kind if kind in ("enabled", "adaptive") else "disabled"


def _current_assistant(messages: list[dict[str, Any]]) -> tuple[int, bool] | None:
    """The assistant message of the turn in progress, and whether tool results follow it.

    That is the last assistant message when it ends the request (a prefill) or when only user messages
    follow it and they start with a ``tool_result`` (the tool loop goes on). After a fresh user message the
    assistant's turn is over: its thinking is no longer required nor checked for the thinking mode."""
    last = max((n for n, message in enumerate(messages) if message["role"] == "assistant"), default=None)
    if last is None:
        return None
    if last == len(messages) - 1:
        return last, False
    run = _user_run(messages, last + 1)
    if run and is_tool_result(run[0][2]):
        return last, True
    return None


def _thinking(body: dict[str, Any], messages: list[dict[str, Any]], shift: int) -> Violation | None:
    """AM-9 (manual thinking only: whether adaptive thinking relaxes it is only claimed) and AM-11."""
    current = _current_assistant(messages)
    if current is None:
        return None
    n, in_tool_loop = current
    blocks = content_blocks(messages[n])
    mode = _thinking_mode(body)
    if mode == "enabled" and in_tool_loop and blocks and not is_thinking(blocks[0]):
        return Violation(
            "AM-9",
            f"{_at(n, shift)}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{blocks[0]['type']}`. "
            "When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
            "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous "
            f"turns. To avoid this requirement, disable `thinking`. Please consult our documentation at {EXTENDED_THINKING_DOCS}",
            index=n,
        )
    if mode == "disabled":
        k = next((k for k, block in enumerate(blocks) if is_thinking(block)), None)
        if k is not None:
            return Violation(
                "AM-11",
                f"{_at(n, shift)}.content.{k}: When thinking is disabled, an `assistant` message in the final position "
                "cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request.",
                index=n,
            )
    return None


# --------------------------------------------------------------------------------------------------
# 5. Signatures
# --------------------------------------------------------------------------------------------------


def _invalid_signature(n: int, k: int, block: Block, shift: int, binding: bool = False) -> Violation:
    """AM-14. Redacted thinking's wording is constructed from the thinking one (no text in the catalogue)."""
    if block.get("type") == "redacted_thinking":
        text = f"{_at(n, shift)}.content.{k}: Invalid `data` in `redacted_thinking` block"
    else:
        text = f"{_at(n, shift)}.content.{k}: Invalid `signature` in `thinking` block"
    if binding:
        text += (
            ". The block is bound to a different conversation. Remove the block, or set "
            '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block". That setting requires the '
            "`thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header. The `system` prompt differs "
            "from the one this block was created with."
        )
    return Violation("AM-14", text, index=n)


def _modified(n: int, k: int, shift: int) -> Violation:
    return Violation(
        "AM-13",
        f"{_at(n, shift)}.content.{k}: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
        "modified. These blocks must remain as they were in the original response.",
        index=n,
    )


def _signatures(body: dict[str, Any], messages: list[dict[str, Any]], shift: int, profile: Profile, state: ServerState) -> Violation | None:
    """AM-14 for every signed thinking block of the request, AM-13 for the latest assistant message's.

    A block whose signature the server minted but whose content changed is AM-13 in the latest assistant
    message (the catalogue's wave of reports) and AM-14 elsewhere (its signature no longer verifies). In
    the latest message the signed blocks must also be all of the original answer's, in their order."""
    latest = max((n for n, message in enumerate(messages) if message["role"] == "assistant"), default=None)
    system = _system_key(body.get("system"))
    for n, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        signed: list[tuple[int, Block, Minted]] = []
        for k, block in enumerate(content_blocks(message)):
            if not is_thinking(block) or (block["type"] == "thinking" and _unsigned_ok(block, profile)):
                continue
            minted = state.lookup(block)
            if minted is None:
                return _invalid_signature(n, k, block, shift)
            if state.bind_system and minted.system != system:
                return _invalid_signature(n, k, block, shift, binding=True)
            if block != minted.block:
                return _modified(n, k, shift) if n == latest else _invalid_signature(n, k, block, shift)
            signed.append((k, block, minted))
        if n == latest and signed:
            expected = state.answer_keys(signed[0][2].answer)
            got = [_thinking_key(block) for _, block, _ in signed]
            if got != expected:
                differs = next((i for i, key in enumerate(got) if i >= len(expected) or key != expected[i]), len(got))
                return _modified(n, signed[differs][0] if differs < len(signed) else signed[-1][0] + 1, shift)
    return None


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def violations(body: Any, *, profile: Profile = "anthropic", state: ServerState | None = None, count_tokens: bool = False,
               user_first: bool = False) -> list[Violation]:
    """The violations of a parsed request body, in the order described in the module docstring.

    Each stage stops at its first finding (a server answers with one error), so the list holds at most one
    violation per stage; shape violations end the check. Without ``state`` signatures are not checked.
    ``count_tokens``: the body of ``/v1/messages/count_tokens`` (no ``max_tokens``). ``user_first``: a server that
    refuses a history opening with the assistant."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    bad = _body(body, count_tokens)
    if bad is not None:
        return [bad]
    messages = body["messages"]
    shift = 1 if isinstance(messages[0], dict) and messages[0].get("role") == "assistant" else 0
    for n, message in enumerate(messages):
        system = isinstance(message, dict) and message.get("role") == "system"
        bad = _system_message(n, messages, shift, profile) if system else _message_shape(n, message, shift, profile)
        if bad is not None:
            return [bad]
    found = [_sequence(messages, shift) or (_opening(messages) if user_first else None), _thinking(body, messages, shift)]
    if state is not None:
        found.append(_signatures(body, messages, shift, profile, state))
    return [v for v in found if v is not None]


def check(raw: bytes, *, profile: Profile = "anthropic", state: ServerState | None = None, count_tokens: bool = False) -> Violation | None:
    """The first violation of a raw request body (what the server answers), or None when it is valid."""
    body = parse(raw)
    if isinstance(body, Violation):
        return body
    found = violations(body, profile=profile, state=state, count_tokens=count_tokens)
    return found[0] if found else None
