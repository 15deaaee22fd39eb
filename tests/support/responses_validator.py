"""A strict OpenAI Responses provider's request validator (``POST /v1/responses``), as a pure function.

It implements the Responses rules of the catalogue (RS-1 .. RS-18; RS-11 only for a server that verifies encrypted
content, see :class:`ServerState`): every violation names its rule id and carries
the provider's error text with the real ids and ``input`` indexes substituted, and :func:`error_for` turns the
first one into ``(HTTP status, error body)``. Where a rule has no quoted text (the call families other than
``function_call`` and ``custom_tool_call``, RS-13's code, RS-15) the text is built from the same validator family
and the check's docstring says "constructed".

Two failure families (docs/provider-rules.md section 5): *pairing* by ``call_id`` and *item identity*: an input item carrying a
server ``id`` is looked up in what the server stored, and a stored call or message needs its reasoning item.
Identity needs the server's memory, so the checks take a :class:`ServerState` (the scripted upstream of
``responses_upstream`` fills one in as it answers). The checks see the *conversation*: with
``previous_response_id``, the stored history of that response (its context and output) and then ``input``, with
every ``item_reference`` replaced by the item it names.

Ordering (what :func:`first_violation` reports), like a server that validates the schema, then resolves ids, then
checks the sequence; inside each phase in ``input`` order:

    shape     RS-14 id/call_id > 64, RS-13 id characters, RS-12 id prefix, RS-15 output without call_id
    lookup    RS-10 unknown previous_response_id; RS-7 (404) under store:false, an id the server must look up (an
              ``item_reference``, reasoning without ``encrypted_content``; an item carrying its content is taken), RS-8 (404) unknown
              id, RS-9 duplicate id (twice in input, or already in the previous response's history); then RS-11
              encrypted content the server did not mint for the request's key (when it verifies it)
    identity  RS-4/RS-5 stored fc_/msg_ item without its reasoning item earlier in the conversation, RS-6 reasoning
              not followed by the item it produced
    pairing   RS-1 (function_call), RS-2 (custom_tool_call and the other call families) unanswered call,
              RS-3 output with no earlier call of its family

Judgement calls (the catalogue leaves them open):

* A call must come before its output (RS-3 for an output whose call comes later). With ``previous_response_id``,
  a call of the previous response that ``input`` does not answer is RS-1 (the half-answered parallel call case).
* ``tool_search_call`` executed by the server (``execution: "server"``) needs no output; the tool search family's
  ``call_id`` is optional (SDK types), so RS-15 does not apply to it.
* RS-6: the item after a reasoning item must be one the model produced: not another reasoning item, not a
  user/system/developer message, not an output, and there must be one.
* RS-4 covers every stored item that followed a reasoning item in its response (the text names the item's type);
  RS-5 is the ``message`` case.
* Profiles ``deepseek`` (RS-17) and ``kimi`` (RS-18) are translation layers to chat: only what the catalogue
  documents for them is checked, the request body's basic shape and chat adjacency: a run of consecutive calls
  must be followed at once by the outputs of all of them. Kimi's orphan-output text is its chat KI-1 text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.dialects.responses.items import CALL_TYPES, OUTPUT_TYPES, answers, call_id_of, is_call, is_output

from .strict_validator import Violation, _invalid_type, _missing_parameter

__all__ = ["MAX_ID_LENGTH", "PROFILES", "ServerState", "Violation", "error_for", "first_violation", "resolve", "status_of",
           "violations"]

PROFILES = ("openai", "deepseek", "kimi")
MAX_ID_LENGTH = 64  # RS-14
# RS-12: the prefixes the catalogue quotes (msg, fc, rs) and the custom tool call's (docs/provider-rules.md section 5.1).
ID_PREFIX = {"message": "msg", "function_call": "fc", "reasoning": "rs", "custom_tool_call": "ctc"}
_ID_CHARS = re.compile(r"[A-Za-z0-9_-]+")
_NOT_FOUND = frozenset({"RS-7", "RS-8"})
_INPUT_ROLES = frozenset({"user", "system", "developer"})
_CALL_ID_OPTIONAL = frozenset({"tool_search_call", "tool_search_output"})


@dataclass
class ServerState:
    """What the server stored, for the identity rules.

    ``items``: every stored output item by its id. ``reasoning_of``: for a stored item that followed a reasoning
    item in its response (``fc_``, ``ctc_``, ``msg_``), the ``rs_`` id of that reasoning item (RS-4, RS-5).
    ``histories``: per stored response id, the conversation it ended (its context, then its output), which is what
    a later ``previous_response_id`` expands to. ``encrypted``: None for a server that does not verify encrypted
    content (RS-11 never found); else every ``encrypted_content`` it minted (stored or not) with the API key it was
    minted for (None: any key), and a reasoning or compaction item carrying any other, or one minted for another
    key, is RS-11.
    """

    items: dict[str, dict] = field(default_factory=dict)
    reasoning_of: dict[str, str] = field(default_factory=dict)
    histories: dict[str, list[dict]] = field(default_factory=dict)
    encrypted: dict[str, str | None] | None = None

    def mint(self, blob: str, key: str | None = None) -> None:
        """Note encrypted content this server made, for ``key`` (verified only by a server that verifies)."""
        if self.encrypted is not None:
            self.encrypted[blob] = key

    def remember(self, response_id: str, context: list[dict], output: list[dict]) -> None:
        """Store one response: its output items, which reasoning each one needs, and its whole history."""
        reasoning: str | None = None
        for item in output:
            item_id = item.get("id")
            if not isinstance(item_id, str):
                continue
            self.items[item_id] = item
            if item.get("type") == "reasoning":
                reasoning = item_id
            elif reasoning is not None:
                self.reasoning_of[item_id] = reasoning
        self.histories[response_id] = [*context, *output]


# --------------------------------------------------------------------------------------------------
# the request as the checks see it
# --------------------------------------------------------------------------------------------------


def _kind(item: dict) -> str | None:
    """An input item's type: ``type`` when given, else a message (``role``) or an ``item_reference`` (``id`` only)."""
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    if "role" in item:
        return "message"
    return "item_reference" if "id" in item else None


def _server_id(item: dict) -> str | None:
    """The stored-item id an input item carries (a ``local_shell_call_output``'s ``id`` is its call's id)."""
    item_id = item.get("id")
    if not isinstance(item_id, str) or _kind(item) == "local_shell_call_output":
        return None
    return item_id


def _input(body: dict) -> list[Any]:
    value = body.get("input")
    if value is None:
        return []
    return [{"role": "user", "content": value}] if isinstance(value, str) else value


@dataclass(frozen=True, slots=True)
class _Entry:
    """One item of the conversation: as the server sees it (a reference resolved), and its ``input`` index
    (None for an item of the previous response's history)."""

    item: dict
    n: int | None


def _conversation(body: dict, state: ServerState) -> list[_Entry]:
    previous = body.get("previous_response_id")
    history = state.histories.get(previous, []) if isinstance(previous, str) else []
    entries = [_Entry(item, None) for item in history]
    for n, item in enumerate(_input(body)):
        if isinstance(item, dict):
            if _kind(item) == "item_reference" and isinstance(item.get("id"), str):
                item = state.items.get(item["id"], item)
            entries.append(_Entry(item, n))
    return entries


def resolve(body: Any, state: ServerState | None = None) -> list[dict]:
    """The conversation the server answers: the previous response's history, then ``input`` (a string is one user
    message) with each ``item_reference`` replaced by the stored item. Assumes a body without BASE violations."""
    return [entry.item for entry in _conversation(body, state or ServerState())]


# --------------------------------------------------------------------------------------------------
# BASE: the body and its items are objects
# --------------------------------------------------------------------------------------------------


def _base(body: Any) -> list[Violation]:
    """BASE (constructed OpenAI wording): the body is an object, ``input`` a string or an array of objects,
    ``previous_response_id`` a string."""
    if not isinstance(body, dict):
        return [_invalid_type("BASE", "body", "an object", body, None)]
    value = body.get("input")
    if value is not None and not isinstance(value, (str, list)):
        return [_invalid_type("BASE", "input", "a string or an array", value, None)]
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        return [_invalid_type("BASE", "previous_response_id", "a string", previous, None)]
    return [_invalid_type("BASE", f"input[{n}]", "an object", item, n) for n, item in enumerate(_input(body))
            if not isinstance(item, dict)]


# --------------------------------------------------------------------------------------------------
# shape: RS-12, RS-13, RS-14, RS-15
# --------------------------------------------------------------------------------------------------


def _rs14_too_long(n: int, key: str, value: str) -> Violation:
    """RS-14: an ``id`` or ``call_id`` longer than 64 (composite ``call_…|fc_…`` ids)."""
    return Violation("RS-14", f"Invalid 'input[{n}].{key}': string too long. Expected a string with maximum length "
                     f"{MAX_ID_LENGTH}, but got a string with length {len(value)} instead.", f"input[{n}].{key}", n,
                     "string_above_max_length")


def _rs13_characters(n: int, item_id: str) -> Violation:
    """RS-13: an item id with characters outside ``[A-Za-z0-9_-]`` (code ``invalid_value`` constructed)."""
    return Violation("RS-13", f"Invalid 'input[{n}].id': '{item_id}'. Expected an ID that contains letters, numbers, "
                     "underscores, or dashes, but this value contained additional characters.", f"input[{n}].id", n,
                     "invalid_value")


def _rs12_prefix(n: int, item_id: str, prefix: str) -> Violation:
    """RS-12: an item id with the wrong prefix for its type (``item_…``, ``call_…``, a UUID)."""
    return Violation("RS-12", f"Invalid 'input[{n}].id': '{item_id}'. Expected an ID that begins with '{prefix}'.",
                     f"input[{n}].id", n, "invalid_value")


def _rs15_call_id(n: int, item: dict, rule: str) -> Violation | None:
    """RS-15 (an output) or BASE (a call): the ``call_id`` that pairs them is missing, not a string or empty.

    OpenAI's text is unverified: the "Missing required parameter" / "Invalid type" / "empty string" wordings of
    the same validator family are used (constructed)."""
    path = f"input[{n}].call_id"
    value = item.get("call_id")
    if value is None:
        return _missing_parameter(rule, path, n)
    if not isinstance(value, str):
        return _invalid_type(rule, path, "a string", value, n)
    if not value:
        return Violation(rule, f"Invalid '{path}': empty string. Expected a string with minimum length 1, but got an "
                         "empty string instead.", path, n, "empty_string")
    return None


def _shape(n: int, item: dict) -> list[Violation]:
    out = []
    for key in ("id", "call_id"):
        value = item.get(key)
        if isinstance(value, str) and len(value) > MAX_ID_LENGTH:
            out.append(_rs14_too_long(n, key, value))
    kind = _kind(item)
    item_id = _server_id(item)
    if item_id is not None and len(item_id) <= MAX_ID_LENGTH:
        prefix = ID_PREFIX.get(kind or "")
        if not _ID_CHARS.fullmatch(item_id):
            out.append(_rs13_characters(n, item_id))
        elif prefix is not None and not item_id.startswith(prefix):
            out.append(_rs12_prefix(n, item_id, prefix))
    if kind == "local_shell_call_output":
        if not isinstance(item.get("id"), str) or not item["id"]:
            out.append(_missing_parameter("RS-15", f"input[{n}].id", n))
    elif kind in OUTPUT_TYPES and kind not in _CALL_ID_OPTIONAL:
        out.extend(v for v in [_rs15_call_id(n, item, "RS-15")] if v is not None)
    elif kind in CALL_TYPES and kind not in _CALL_ID_OPTIONAL:
        out.extend(v for v in [_rs15_call_id(n, item, "BASE")] if v is not None)
    return out


# --------------------------------------------------------------------------------------------------
# lookup: RS-10, RS-7, RS-8, RS-9
# --------------------------------------------------------------------------------------------------


def _rs10_previous(body: dict, state: ServerState) -> Violation | None:
    """RS-10: a ``previous_response_id`` the server cannot resolve (never stored, ``store: false``, expired).

    The catalogue quotes the text as relayed to Codex (code ``previous_response_not_found``); the direct API's
    ``param`` is taken to be ``previous_response_id``."""
    previous = body.get("previous_response_id")
    if previous is None or previous in state.histories:
        return None
    return Violation("RS-10", f"Previous response with id '{previous}' not found.", "previous_response_id", None,
                     "previous_response_not_found")


def _looked_up(item: dict) -> bool:
    """Under ``store: false``: an item whose id the server must look up, having nothing else (RS-7)."""
    kind = _kind(item)
    return kind == "item_reference" or (kind == "reasoning" and not item.get("encrypted_content"))


def _rs7_not_persisted(n: int, item_id: str) -> Violation:
    """RS-7 (404): an item the server must look up (:func:`_looked_up`) while ``store`` is false."""
    return Violation("RS-7", f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to false. "
                     "Try again with `store` set to true, or remove this item from your input.", "input", n)


def _rs8_not_found(n: int, item_id: str) -> Violation:
    """RS-8 (404): an item id the server never stored (fabricated, expired, another project)."""
    return Violation("RS-8", f"Item with id '{item_id}' not found.", "input", n)


def _rs9_duplicate(n: int, item_id: str) -> Violation:
    """RS-9: an id sent twice, or resent together with the ``previous_response_id`` that already holds it."""
    return Violation("RS-9", f"Duplicate item found with id {item_id}. Remove duplicate items from your input and try "
                     "again.", "input", n)


def _lookups(body: dict, state: ServerState) -> list[Violation]:
    out = []
    previous = _rs10_previous(body, state)
    if previous is not None:
        return [previous]
    history = state.histories.get(body.get("previous_response_id") or "", [])
    seen = {item_id for item in history if (item_id := _server_id(item)) is not None}
    for n, item in enumerate(_input(body)):
        item_id = _server_id(item) if isinstance(item, dict) else None
        if item_id is None:
            continue
        unstored = body.get("store") is False
        if unstored and _looked_up(item):
            out.append(_rs7_not_persisted(n, item_id))
        elif not unstored and item_id not in state.items:
            out.append(_rs8_not_found(n, item_id))
        elif item_id in seen:
            out.append(_rs9_duplicate(n, item_id))
        seen.add(item_id)
    return out


_UNMINTED = object()


def _rs11_unverified(n: int, item: dict) -> Violation:
    """RS-11: encrypted content the server cannot verify (another organization or key, corrupted). The wording that
    names the item for an item with an id, else the one quoting the blob (shortened as the catalogue shows it)."""
    blob = item["encrypted_content"]
    item_id = item.get("id")
    if isinstance(item_id, str):
        text = (f"The encrypted content for item {item_id} could not be verified. Reason: Encrypted content could not be "
                "decrypted or parsed.")
    else:
        text = f"The encrypted content {blob[:4]}...{blob[-4:]} could not be verified."
    return Violation("RS-11", text, None, n, "invalid_encrypted_content")


def _encrypted(body: dict, state: ServerState, key: str | None) -> list[Violation]:
    if state.encrypted is None:
        return []
    out = []
    for n, item in enumerate(_input(body)):
        blob = item.get("encrypted_content") if isinstance(item, dict) and _kind(item) in ("reasoning", "compaction") else None
        if not isinstance(blob, str):
            continue
        minted = state.encrypted.get(blob, _UNMINTED)
        if minted is _UNMINTED or (minted is not None and minted != key):
            out.append(_rs11_unverified(n, item))
    return out


# --------------------------------------------------------------------------------------------------
# identity: RS-4, RS-5, RS-6
# --------------------------------------------------------------------------------------------------


def _rs4_rs5_without_reasoning(n: int | None, item_id: str, kind: str, reasoning_id: str) -> Violation:
    """RS-4 (a call) / RS-5 (a message): a stored item sent without the reasoning item it came with."""
    return Violation("RS-5" if kind == "message" else "RS-4", f"Item '{item_id}' of type '{kind}' was provided without "
                     f"its required 'reasoning' item: '{reasoning_id}'.", "input", n)


def _rs6_no_following_item(n: int | None, item_id: str) -> Violation:
    """RS-6: a reasoning item not followed by the item it produced (trailing, or orphaned by a filter)."""
    return Violation("RS-6", f"Item '{item_id}' of type 'reasoning' was provided without its required following item.",
                     "input", n)


def _produced_by_model(item: dict) -> bool:
    kind = _kind(item)
    if kind == "reasoning" or kind in OUTPUT_TYPES:
        return False
    return not (kind == "message" and item.get("role") in _INPUT_ROLES)


def _identity(conversation: list[_Entry], state: ServerState) -> list[Violation]:
    out = []
    present: set[str] = set()
    for position, entry in enumerate(conversation):
        item = entry.item
        item_id = _server_id(item)
        if entry.n is not None:
            needed = state.reasoning_of.get(item_id or "")
            if item_id is not None and needed is not None and needed not in present:
                out.append(_rs4_rs5_without_reasoning(entry.n, item_id, _kind(item) or "item", needed))
            if _kind(item) == "reasoning":
                following = conversation[position + 1].item if position + 1 < len(conversation) else None
                if following is None or not _produced_by_model(following):
                    out.append(_rs6_no_following_item(entry.n, item_id or ""))
        if item_id is not None:
            present.add(item_id)
    return out


# --------------------------------------------------------------------------------------------------
# pairing: RS-1, RS-2, RS-3 (openai); RS-17 (deepseek); RS-18 (kimi)
# --------------------------------------------------------------------------------------------------


def _needs_output(call: dict) -> bool:
    return not (call.get("type") == "tool_search_call" and call.get("execution") == "server")


def _rs1_rs2_unanswered(n: int | None, call: dict, call_id: str) -> Violation:
    """RS-1 (``function_call``) / RS-2 (``custom_tool_call``; the other families' texts constructed alike)."""
    kind = call["type"]
    return Violation("RS-1" if kind == "function_call" else "RS-2",
                     f"No tool output found for {kind.replace('_', ' ')} {call_id}.", "input", n)


def _rs3_orphan(n: int, output: dict, call_id: str) -> Violation:
    """RS-3: an output whose ``call_id`` matches no earlier call of its family (texts of other families than
    ``function_call_output`` constructed alike)."""
    family = output["type"].removesuffix("_output").replace("_", " ")
    return Violation("RS-3", f"No tool call found for {family} output with call_id {call_id}.", "input", n)


def _pairing(conversation: list[_Entry]) -> list[Violation]:
    found: list[tuple[int, Violation]] = []
    calls: dict[str, tuple[int, _Entry]] = {}
    answered: set[str] = set()
    for position, entry in enumerate(conversation):
        item = entry.item
        call_id = call_id_of(item)
        if call_id is None:
            continue
        if is_call(item):
            calls.setdefault(call_id, (position, entry))
        elif is_output(item):
            call = calls.get(call_id)
            if call is not None and answers(item["type"], call[1].item["type"]):
                answered.add(call_id)
            elif entry.n is not None:
                found.append((position, _rs3_orphan(entry.n, item, call_id)))
    for call_id, (position, entry) in calls.items():
        if call_id not in answered and _needs_output(entry.item):
            found.append((position, _rs1_rs2_unanswered(entry.n, entry.item, call_id)))
    found.sort(key=lambda pair: pair[0])
    return [v for _, v in found]


def _chat_blocks(items: list[Any]) -> tuple[list[tuple[int, list[str]]], list[tuple[int, str]]]:
    """Chat adjacency over ``input``: ([(first call index, unanswered ids)] per run of consecutive calls,
    [(index, call_id)] per output not answering a call of the run right before it)."""
    unanswered: list[tuple[int, list[str]]] = []
    orphans: list[tuple[int, str]] = []
    block: dict[str, None] = {}
    start = 0
    in_calls = False

    def close() -> None:
        if block:
            unanswered.append((start, list(block)))
            block.clear()

    for n, item in enumerate(items):
        call_id = call_id_of(item)
        if is_call(item):
            if not in_calls:
                close()
                start = n
            in_calls = True
            if call_id is not None:
                block[call_id] = None
            continue
        in_calls = False
        if is_output(item):
            if call_id is not None and call_id in block:
                del block[call_id]
            else:
                orphans.append((n, call_id or ""))
        else:
            close()
    close()
    return unanswered, orphans


def _rs17_deepseek(items: list[Any]) -> list[Violation]:
    """RS-17 (DeepSeek ``/v1/responses``): any item between a call and its output; DeepSeek's texts."""
    unanswered, orphans = _chat_blocks(items)
    found = [(n, Violation("RS-17", f"No tool output found for tool call {ids[0]}", None, n, "invalid_request_error"))
             for n, ids in unanswered]
    found += [(n, Violation("RS-17", f"No tool call found for tool output with call_id {call_id}", None, n,
                            "invalid_request_error")) for n, call_id in orphans]
    return [v for _, v in sorted(found, key=lambda pair: pair[0])]


def _rs18_kimi(items: list[Any]) -> list[Violation]:
    """RS-18 (Kimi ``/coding/v1/responses``, translated to chat): unanswered calls in chat wording, all ids of the
    run listed; an output outside its call's block gets Kimi's chat orphan text (KI-1)."""
    unanswered, orphans = _chat_blocks(items)
    found = [(n, Violation("RS-18", "Invalid request: an assistant message with 'tool_calls' must be followed by tool "
                           "messages responding to each 'tool_call_id'. The following tool_call_ids did not have "
                           f"response messages: {', '.join(ids)}", None, n)) for n, ids in unanswered]
    found += [(n, Violation("RS-18", "Invalid request: messages with role 'tool' must be a response to a preceding "
                            "message with 'tool_calls'", None, n, related=("KI-1",))) for n, _ in orphans]
    return [v for _, v in sorted(found, key=lambda pair: pair[0])]


_ADJACENCY: dict[str, Callable[[list[Any]], list[Violation]]] = {"deepseek": _rs17_deepseek, "kimi": _rs18_kimi}


# --------------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------------


def violations(body: Any, state: ServerState | None = None, profile: str = "openai", key: str | None = None) -> list[Violation]:
    """All violations of a ``/v1/responses`` request body, in the order the server would find them (first = its
    answer). ``state``: what the server stored (empty when None). ``profile``: one of :data:`PROFILES`. ``key``: the
    API key the request came with (what encrypted content is verified against, RS-11)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    base = _base(body)
    if base:
        return base
    items = _input(body)
    if profile != "openai":
        return _ADJACENCY[profile](items)
    state = state or ServerState()
    shape = [v for n, item in enumerate(items) for v in _shape(n, item)]
    lookups = _lookups(body, state)
    if any(v.rule == "RS-10" for v in lookups):
        return shape + lookups
    conversation = _conversation(body, state)
    return shape + lookups + _encrypted(body, state, key) + _identity(conversation, state) + _pairing(conversation)


def first_violation(body: Any, state: ServerState | None = None, profile: str = "openai", key: str | None = None) -> Violation | None:
    """The violation the server answers for ``body`` (None when it accepts the request)."""
    found = violations(body, state, profile, key)
    return found[0] if found else None


def status_of(violation: Violation) -> int:
    """The HTTP status of a violation: 404 for the lookups of RS-7 and RS-8, 400 for the others."""
    return 404 if violation.rule in _NOT_FOUND else 400


def error_for(body: Any, state: ServerState | None = None, profile: str = "openai", key: str | None = None) -> tuple[int, dict] | None:
    """``(HTTP status, error body)`` the server answers for ``body``, or None when it is valid.

    The body is ``{"error": {"message", "type", "param", "code"}}``; DeepSeek's has ``param: null`` and
    ``code: "invalid_request_error"`` (the violation carries them)."""
    v = first_violation(body, state, profile, key)
    if v is None:
        return None
    return status_of(v), {"error": {"message": v.message, "type": "invalid_request_error", "param": v.param, "code": v.code}}
