"""Per-provider request validators: what each strict provider of ``docs/provider-rules.md`` rejects.

``provider_violations(body, provider)`` = the strict-profile violations of :mod:`strict_validator` that the
provider enforces (a per-provider skip list of universal/OpenAI rules it does not enforce), with the texts of
the rules the provider words itself (e.g. DeepSeek's DS-1/DS-2 instead of OAI-1/OAI-2), PLUS the provider's
own rules.  ``provider_error(body, provider)`` turns the first violation into ``(status, error body)`` in the
provider's error shape.

Ordering (the first violation is what the provider answers):

1. *schema* checks of the provider (closed schemas MI-7/GR-1/AN-6, null/absent content GE-6/OL-1/VL-4,
   GR-2) - these providers parse the request into typed models before anything else;
2. the strict profile's shape violations (translated), then the provider's own shape checks (ids, names,
   DS-3, AN-4, XA-1, GE-4);
3. sequence violations (pairing / order), base and provider ones merged by message index.

Judgement calls (the catalogue leaves them open):

* Skips: ``S12`` is enforced only by gemini (as GE-3); ``VL-2`` (arguments must be a JSON *object*) only by
  vllm; ``OAI-8`` (id <= 40 chars, E-ID-40) only by openai; ``S9`` (tool content an array of text parts) only by
  mistral, groq and vllm (MI-9, GR-2: OpenAI takes the parts, OAI-10).  Rules a provider replaces with its own check are
  skipped too (mistral's MI-1/MI-2/MI-3 replace OAI-1/OAI-2/S5; GE-6, OL-1 and XA-1 replace OAI-9).
* DeepSeek/Kimi thinking mode (DS-3, KI-4) is on when ``body["thinking"] == {"type": "enabled"}``, off when it is
  ``{"type": "disabled"}``; otherwise on when an assistant message already carries a string ``reasoning_content``,
  or by the model (after any ``org/`` prefix): on when it contains ``reasoner`` or ``thinking``, for DeepSeek V4
  (``deepseek-v4*``) and Kimi K2.5 and later (``kimi-k2.5``, ``kimi-k2.6``...); off for ``deepseek-chat`` and for
  models of other providers (``qwen3-coder-plus``) (:func:`deepseek_thinking`).  ``reasoning_content`` must be a
  string; ``""`` is accepted (DS-4).
* vLLM turns empty ``arguments`` into ``{}`` (VL-1), so ``""`` is accepted there; any other unparsable text is
  VL-1 with ``json.loads``'s message.
* Anthropic / Gemini indexes in error texts are those of the *converted* request: system/developer messages
  hoisted out, consecutive same-role turns (user + tool results count as one user turn) merged; the content
  block / part index counts the blocks of the merged turn.  GE-4's ``position`` is the 1-based index of the
  model turn in ``contents`` (the observed "position 2" for a call right after the first user message).
* OpenRouter (GE-8) plays a Gemini 3 model (``google/gemini-3*``) behind it: a call turn of the current turn
  (after the last user message) whose calls the upstream emitted with ``reasoning_details`` must carry the
  emitted ``reasoning.encrypted`` entry (the thought signature) unchanged; earlier turns are not checked (Gemini
  validates the current turn only).  Other models get the OpenAI rules.
* Mistral: developer messages are treated like system messages (not checked further); MI-5 (last message
  user or tool) is enforced; the "Tool call id was null" exception of mistral_common is not modelled.
* Groq: several unsupported properties of one message are listed in one bracket, joined by ", "; nested
  ones are located as ``'messages.N.tool_calls.K'`` (constructed).  The "did you mean 'role'?" suffix is
  reproduced only for ``reasoning`` (the one observed suggestion).
* xAI: XA-2's parse error imitates serde_json for empty / truncated text (``EOF while parsing ...``, line and
  column of the end); other errors carry Python's ``json`` message (approximation).
* Error shapes: openai/anthropic/groq/ollama the OpenAI shape; deepseek the OpenAI shape with ``param: null``,
  ``code: "invalid_request_error"``; mistral ``{"object": "error", "message", "type", "param", "code"}`` and
  HTTP 422 ``{"object": "error", "message": {"detail": [...]}, ...}`` for MI-7; gemini the compat layer's list
  ``[{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT"}}]``; openrouter's GE-8
  ``{"error": {"message": "Provider returned error", "code": 400, "metadata": {"raw", "provider_name"}}}`` (the
  others the OpenAI shape); xai
  ``{"code": "Client specified an invalid argument", "error": message}``; vllm
  ``{"error": {"message", "type": "BadRequestError", "param": null, "code": 400}}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .strict_validator import Violation, violations

__all__ = [
    "PROVIDERS",
    "provider_violations",
    "provider_first",
    "provider_error",
    "deepseek_thinking",
    "gemini_3",
    "MISTRAL_FIELDS",
    "OPENAI_FIELDS",
]

PROVIDERS = ("openai", "mistral", "deepseek", "anthropic", "gemini", "ollama", "xai", "groq", "vllm", "openrouter")

# Rules of the strict profile that are about the message *sequence* (merged with provider sequence checks).
_BASE_SEQUENCE = frozenset({"OAI-1", "OAI-2", "S5", "S12"})
_MISSING = object()

MISTRAL_ID = re.compile(r"^[a-zA-Z0-9]{9}$")
MISTRAL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

_TOOL_CALL_FIELDS = {"tool_call": frozenset({"id", "type", "function"}), "function": frozenset({"name", "arguments"})}

# MI-7: mistral_common's request models (extra=forbid).
MISTRAL_FIELDS: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "prefix"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
    **_TOOL_CALL_FIELDS,
}

# GR-1: the OpenAI message schema (openai-python's *MessageParam types), enforced closed by Groq.
OPENAI_FIELDS: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls", "function_call", "refusal", "audio"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
    "function": frozenset({"role", "content", "name"}),
    **_TOOL_CALL_FIELDS,
}


# --------------------------------------------------------------------------------------------------
# context: the request as the checks see it
# --------------------------------------------------------------------------------------------------


@dataclass
class _Ctx:
    body: Any
    emitted_signatures: Mapping[str, Any] | None = None
    _turns: dict[int, tuple[int, int]] | None = field(default=None, repr=False)

    @property
    def messages(self) -> list[Any]:
        return self.body["messages"]

    def message(self, n: int | None) -> dict:
        if n is None:
            return {}
        msg = self.messages[n]
        return msg if isinstance(msg, dict) else {}

    def role(self, n: int | None) -> Any:
        return self.message(n).get("role")

    def turn(self, n: int) -> tuple[int, int]:
        """(index of the converted turn, first block index inside it) for Anthropic / Gemini texts."""
        if self._turns is None:
            self._turns = _converted_turns(self.messages)
        return self._turns.get(n, (n, 0))


def _dicts(messages: list[Any]) -> Iterator[tuple[int, dict]]:
    for n, msg in enumerate(messages):
        if isinstance(msg, dict):
            yield n, msg


def _calls(msg: dict) -> list[tuple[int, dict]]:
    calls = msg.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [(k, c) for k, c in enumerate(calls) if isinstance(c, dict)]


def _has_calls(msg: dict) -> bool:
    calls = msg.get("tool_calls")
    return isinstance(calls, list) and bool(calls)


def _has_text(msg: dict) -> bool:
    content = msg.get("content")
    return (isinstance(content, str) and content != "") or (isinstance(content, list) and bool(content))


def _converted_turns(messages: list[Any]) -> dict[int, tuple[int, int]]:
    """Message index -> (converted turn index, first block index) for Anthropic-/Gemini-style conversion."""
    out: dict[int, tuple[int, int]] = {}
    turn, blocks, previous = -1, 0, None
    for n, msg in _dicts(messages):
        role = msg.get("role")
        if role in ("system", "developer"):
            continue
        side = "assistant" if role == "assistant" else "user"
        if side != previous:
            turn, blocks, previous = turn + 1, 0, side
        out[n] = (turn, blocks)
        if role == "assistant":
            blocks += int(_has_text(msg)) + len(_calls(msg))
        elif role == "tool":
            blocks += 1
        else:
            content = msg.get("content")
            blocks += len(content) if isinstance(content, list) else 1
    return out


_CALL_INDEX = re.compile(r"tool_calls\[(\d+)\]")


def _call_of(ctx: _Ctx, v: Violation) -> tuple[int, dict]:
    """The (k, call) a base violation's ``param`` points at (``messages[n].tool_calls[k]...``)."""
    match = _CALL_INDEX.search(v.param or "")
    if match is None:
        return 0, {}
    k = int(match.group(1))
    calls = ctx.message(v.index).get("tool_calls")
    call = calls[k] if isinstance(calls, list) and k < len(calls) and isinstance(calls[k], dict) else {}
    return k, call


def _relabel(v: Violation, rule: str, message: str | None = None, *, code: Any = _MISSING,
             param: Any = _MISSING) -> Violation:
    """``v`` under the provider's rule id (the old id joins ``related``), optionally with its own text."""
    related = tuple(dict.fromkeys((v.rule, *v.related)))
    related = tuple(r for r in related if r != rule)
    return replace(
        v,
        rule=rule,
        message=v.message if message is None else message,
        code=v.code if code is _MISSING else code,
        param=v.param if param is _MISSING else param,
        related=related,
    )


# --------------------------------------------------------------------------------------------------
# Mistral: MI-1, MI-2, MI-3, MI-4, MI-5, MI-6, MI-7, MI-8
# --------------------------------------------------------------------------------------------------

_MISTRAL_ORDER = {
    "system": {"user", "assistant", "system"},
    "user": {"assistant", "system", "user"},
    "assistant": {"assistant", "user", "tool"},
    "tool": {"assistant", "tool"},
}


def _mistral_role(role: Any) -> Any:
    return "system" if role == "developer" else role


def _mi7_closed_schema(ctx: _Ctx) -> list[Violation]:
    """MI-7 (E-MI-3): Mistral's schema is closed (extra=forbid) - any unknown key is HTTP 422 extra_forbidden.

    ``param`` carries the pydantic ``loc`` joined with dots (``body.messages.N.<role>.<key>``; inside tool
    calls ``...assistant.tool_calls.K.<key>`` / ``...tool_calls.K.function.<key>``).
    """
    out = []
    for n, msg in _dicts(ctx.messages):
        role = msg.get("role")
        allowed = MISTRAL_FIELDS.get(role) if isinstance(role, str) else None
        if allowed is None:
            continue
        loc = ("body", "messages", n, role)
        out += [_mi7(n, (*loc, key)) for key in msg if key not in allowed]
        if role != "assistant":
            continue
        for k, call in _calls(msg):
            out += [_mi7(n, (*loc, "tool_calls", k, key)) for key in call if key not in MISTRAL_FIELDS["tool_call"]]
            function = call.get("function")
            if isinstance(function, dict):
                out += [_mi7(n, (*loc, "tool_calls", k, "function", key))
                        for key in function if key not in MISTRAL_FIELDS["function"]]
    return out


def _mi7(n: int, loc: tuple) -> Violation:
    return Violation("MI-7", "Extra inputs are not permitted", ".".join(map(str, loc)), n, "extra_forbidden",
                     ("E-MI-3",))


def _mi4_call_ids(ctx: _Ctx) -> list[Violation]:
    """MI-4 (E-MI-1): call ids and ``tool_call_id`` must match ``^[a-zA-Z0-9]{9}$``."""
    out = []
    for n, msg in _dicts(ctx.messages):
        if msg.get("role") == "assistant":
            for k, call in _calls(msg):
                call_id = call.get("id")
                if isinstance(call_id, str) and call_id and not MISTRAL_ID.match(call_id):
                    out.append(_mi4(n, call_id, f"messages[{n}].tool_calls[{k}].id"))
        elif msg.get("role") == "tool":
            call_id = msg.get("tool_call_id")
            if isinstance(call_id, str) and not MISTRAL_ID.match(call_id):
                out.append(_mi4(n, call_id, f"messages[{n}].tool_call_id"))
    return out


def _mi4(n: int, call_id: str, param: str) -> Violation:
    return Violation("MI-4", f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9.",
                     param, n, "3280", ("E-MI-1",))


def _mi8_names(ctx: _Ctx) -> list[Violation]:
    """MI-8: a tool message's ``name`` (and, in mistral_common, a call's ``function.name``) must match
    ``^[a-zA-Z0-9_-]{1,64}$``."""
    out = []
    for n, msg in _dicts(ctx.messages):
        names: list[tuple[str, Any]] = []
        if msg.get("role") == "tool" and "name" in msg and msg["name"] is not None:
            names.append((f"messages[{n}].name", msg["name"]))
        if msg.get("role") == "assistant":
            for k, call in _calls(msg):
                function = call.get("function")
                if isinstance(function, dict) and isinstance(function.get("name"), str) and function["name"]:
                    names.append((f"messages[{n}].tool_calls[{k}].function.name", function["name"]))
        for param, name in names:
            if not (isinstance(name, str) and MISTRAL_NAME.match(name)):
                out.append(Violation(
                    "MI-8", f"Function name was {name} but must be a-z, A-Z, 0-9, or contain underscores and "
                    "dashes, with a maximum length of 64.", param, n, "3280"))
    return out


def _mi1_role_order(ctx: _Ctx) -> list[Violation]:
    """MI-1 (E-MI-2): allowed role transitions (after tool only assistant/tool; after user no tool; ...)."""
    out = []
    previous = None
    for n, msg in _dicts(ctx.messages):
        role = _mistral_role(msg.get("role"))
        if role not in _MISTRAL_ORDER:
            previous = None
            continue
        if previous is not None and role not in _MISTRAL_ORDER[previous]:
            out.append(Violation("MI-1", f"Unexpected role '{role}' after role '{previous}'",
                                 f"messages[{n}].role", n, "3230", ("E-MI-2",)))
        previous = role
    return out


def _mi2_mi3_counting(ctx: _Ctx) -> list[Violation]:
    """MI-2 (counting) and MI-3 (id bookkeeping), as mistral_common's validator walks the messages.

    Reaching an assistant message (or the end of the request) while the previous assistant's calls are not
    all answered, or a tool message beyond the number of calls -> MI-2 ``Not the same number of function calls
    and responses``.  A result for an id the open assistant did not declare, or a second result for one id
    -> MI-3 ``Unexpected tool call id ...`` / ``Duplicate tool call id ... in tool results``.
    """
    out = []
    opener: int | None = None
    declared: set[str] = set()
    answered: set[str] = set()
    pending = 0

    def mi2(n: int) -> Violation:
        return Violation("MI-2", "Not the same number of function calls and responses", "messages", n, "3230",
                         ("S1", "S3", "E-MI-2"))

    for n, msg in _dicts(ctx.messages):
        role = msg.get("role")
        if role == "assistant":
            if pending != 0:
                out.append(mi2(n))
            ids = [c.get("id") for _, c in _calls(msg)]
            opener, pending = (n, len(ids)) if ids else (None, 0)
            declared, answered = {i for i in ids if isinstance(i, str)}, set()
        elif role == "tool":
            pending -= 1
            if pending < 0:
                out.append(mi2(n))
                pending = 0
                continue
            call_id = msg.get("tool_call_id")
            if not isinstance(call_id, str):
                continue
            if call_id in answered:
                out.append(Violation("MI-3", f"Duplicate tool call id {call_id} in tool results",
                                     f"messages[{n}].tool_call_id", n, "3230", ("S5",)))
            elif call_id not in declared:
                out.append(Violation("MI-3", f"Unexpected tool call id {call_id} in tool results",
                                     f"messages[{n}].tool_call_id", n, "3230", ("S2",)))
            answered.add(call_id)
    if pending > 0 and opener is not None:
        out.append(mi2(opener))
    return out


def _mi5_last_role(ctx: _Ctx) -> list[Violation]:
    """MI-5 (E-MI-2): the last message is user or tool (or an assistant with ``prefix: true``)."""
    n = len(ctx.messages) - 1
    msg = ctx.message(n)
    role = _mistral_role(msg.get("role"))
    if role in ("user", "tool") or (role == "assistant" and msg.get("prefix") is True) or not isinstance(role, str):
        return []
    return [Violation("MI-5", f"Expected last role User or Tool (or Assistant with prefix True) for serving but "
                      f"got {role}", "messages", n, "3230", ("E-MI-2",))]


_MI6_TEXT = "Assistant message must have either content or tool_calls, but not none."


def _mistral_translate(v: Violation, ctx: _Ctx) -> Violation | None:
    """Mistral's own wording for strict-profile rules it words itself (MI-3, MI-4, MI-6)."""
    if v.rule == "OAI-3":
        return _relabel(v, "MI-4", "Tool call id has to be defined.", code="3280")
    if v.rule == "S10" or (v.rule == "OAI-9" and ctx.role(v.index) == "assistant"):
        return _relabel(v, "MI-6", _MI6_TEXT)
    if v.rule == "S4" and "AN-3" in v.related:
        _, call = _call_of(ctx, v)
        return _relabel(v, "MI-3", f"Duplicate tool call id {call.get('id')} in assistant message", code="3230")
    return v


# --------------------------------------------------------------------------------------------------
# DeepSeek: DS-1, DS-2, DS-3/DS-4, DS-6
# --------------------------------------------------------------------------------------------------

DS3_TEXT = "The `reasoning_content` in the thinking mode must be passed back to the API."


#: The models that think on their own: DeepSeek V4 (its error text is V4's, DS-3), Kimi K2.5 and later (KI-4).
_THINKING_MODELS = re.compile(r"deepseek-v4|kimi-k(?:2\.[5-9]|[3-9])")


def deepseek_thinking(body: Any) -> bool:
    """Whether a DeepSeek (or Kimi) request is in thinking mode (judgement call, see the module docstring)."""
    if not isinstance(body, dict):
        return False
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "disabled"):
        return thinking["type"] == "enabled"
    messages = body.get("messages")
    if isinstance(messages, list) and any(msg.get("role") == "assistant" and isinstance(msg.get("reasoning_content"), str)
                                          for _, msg in _dicts(messages)):
        return True
    model = body.get("model")
    name = model.lower().split("/")[-1] if isinstance(model, str) else ""
    return "reasoner" in name or "thinking" in name or _THINKING_MODELS.match(name) is not None


def _ds3_reasoning_content(ctx: _Ctx) -> list[Violation]:
    """DS-3 (E-RC, DS-4): in thinking mode every assistant message with tool calls carries a string
    ``reasoning_content`` (``""`` accepted)."""
    if not deepseek_thinking(ctx.body):
        return []
    return [
        Violation("DS-3", DS3_TEXT, f"messages[{n}].reasoning_content", n, "invalid_request_error", ("E-RC", "DS-4"))
        for n, msg in _dicts(ctx.messages)
        if msg.get("role") == "assistant" and _has_calls(msg) and not isinstance(msg.get("reasoning_content"), str)
    ]


def _deepseek_translate(v: Violation, ctx: _Ctx) -> Violation | None:
    """DeepSeek's own texts for the pairing rules (DS-1, DS-2) and the empty array (DS-6)."""
    if v.rule == "OAI-1":
        return _relabel(v, "DS-1", "Messages with role 'tool' must be a response to a preceding message with "
                        "'tool_calls'", code="invalid_request_error")
    if v.rule == "OAI-2":
        return _relabel(v, "DS-2", "An assistant message with 'tool_calls' must be followed by tool messages "
                        "responding to each 'tool_call_id'. (insufficient tool messages following tool_calls "
                        "message)", code="invalid_request_error")
    if v.rule == "OAI-4":
        return _relabel(v, "DS-6")
    return v


# --------------------------------------------------------------------------------------------------
# Anthropic (OpenAI compat / Anthropic-backed routes): AN-1, AN-2, AN-3, AN-4, AN-6
# --------------------------------------------------------------------------------------------------

AN4_TEXT = "messages: text content blocks must be non-empty"


def _an4_empty_text(ctx: _Ctx) -> list[Violation]:
    """AN-4 (E-CT-NULL, S10): ``content: ""`` on an assistant with tool calls, or any empty text part,
    becomes an empty text block and is rejected."""
    out = []
    for n, msg in _dicts(ctx.messages):
        content = msg.get("content")
        empty = False
        if msg.get("role") == "assistant" and _has_calls(msg) and content == "":
            empty = True
        elif isinstance(content, list):
            empty = any(isinstance(p, dict) and p.get("type") == "text" and p.get("text") in ("", None)
                        for p in content)
        if empty:
            out.append(Violation("AN-4", AN4_TEXT, f"messages.[{n}].content", n, None, ("E-CT-NULL", "S10")))
    return out


def _an6_tool_call_keys(ctx: _Ctx) -> list[Violation]:
    """AN-6: keys other than ``id``/``type``/``function`` inside a tool call (e.g. a streamed ``index``)."""
    out = []
    for n, msg in _dicts(ctx.messages):
        if msg.get("role") != "assistant":
            continue
        turn, first = ctx.turn(n)
        for k, call in _calls(msg):
            block = first + int(_has_text(msg)) + k
            out += [Violation("AN-6", f"messages.{turn}.content.{block}.tool_use.{key}: Additional input is not allowed",
                              f"messages[{n}].tool_calls[{k}].{key}", n, None, ("E-MI-3",))
                    for key in call if key not in _TOOL_CALL_FIELDS["tool_call"]]
    return out


def _anthropic_translate(v: Violation, ctx: _Ctx) -> Violation | None:
    """Anthropic's texts for pairing (AN-1, AN-2), unique ids (AN-3) and empty content (AN-4)."""
    if v.rule == "OAI-2":
        missing = v.message.rsplit("did not have response messages: ", 1)[-1]
        turn, _ = ctx.turn(v.index)
        return _relabel(v, "AN-1", f"messages.{turn}: `tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {missing}. Each `tool_use` block must have a corresponding "
                        "`tool_result` block in the next message.")
    if v.rule == "OAI-1":
        turn, block = ctx.turn(v.index)
        call_id = ctx.message(v.index).get("tool_call_id")
        return _relabel(v, "AN-2", f"messages.{turn}.content.{block}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {call_id}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message.")
    if v.rule == "S4":
        k, _ = _call_of(ctx, v)
        turn, first = ctx.turn(v.index)
        block = first + int(_has_text(ctx.message(v.index))) + k
        return _relabel(v, "AN-3", f"messages.{turn}.content.{block}: tool_use ids must be unique")
    if v.rule == "S10":
        if v.message == AN4_TEXT:
            return _relabel(v, "AN-4")
        turn, _ = ctx.turn(v.index)
        return _relabel(v, "AN-4", f"messages.{turn}: all messages must have non-empty content except for the "
                        "optional final assistant message")
    return v


# --------------------------------------------------------------------------------------------------
# Gemini (OpenAI compat): GE-1, GE-2, GE-3 (S12), GE-4, GE-6
# --------------------------------------------------------------------------------------------------

GE3_CALL_TEXT = ("Please ensure that function call turn comes immediately after a user turn or after a function "
                 "response turn.")
GE3_RESPONSE_TEXT = "Please ensure that function response turn comes immediately after a function call turn."
GE2_TEXT = ("Please ensure that the number of function response parts is equal to the number of function call "
            "parts of the function call turn.")


def _ge6_null_content(ctx: _Ctx) -> list[Violation]:
    """GE-6 (E-CT-EMPTY): ``content: null`` on any message, tool-call turns included."""
    return [Violation("GE-6", "Expected string or list of content parts, got: null", f"messages[{n}].content", n,
                      None, ("E-CT-EMPTY", "OAI-9"))
            for n, msg in _dicts(ctx.messages) if "content" in msg and msg["content"] is None]


def _ge4_thought_signature(ctx: _Ctx) -> list[Violation]:
    """GE-4 (E-GE-SIG): a replayed call whose id the upstream emitted with ``extra_content`` (the thought
    signature) must carry the identical ``extra_content``.  Needs ``emitted_signatures`` ({id: extra_content})."""
    emitted = ctx.emitted_signatures
    if not emitted:
        return []
    out = []
    for n, msg in _dicts(ctx.messages):
        if msg.get("role") != "assistant":
            continue
        for k, call in _calls(msg):
            call_id = call.get("id")
            if not isinstance(call_id, str) or call_id not in emitted or call.get("extra_content") == emitted[call_id]:
                continue
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            position = ctx.turn(n)[0] + 1
            out.append(Violation(
                "GE-4",
                "Function call is missing a thought_signature in functionCall parts. This is required for tools to "
                "work correctly, and missing thought_signature may lead to degraded model performance. Additional "
                f"data, function call `default_api:{name}` , position {position}. Please refer to "
                "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                f"messages[{n}].tool_calls[{k}].extra_content", n, None, ("E-GE-SIG",)))
    return out


def _gemini_translate(v: Violation, ctx: _Ctx) -> Violation | None:
    """Gemini's texts: GE-1/GE-3 for tool messages outside their block, GE-2 for unanswered calls, GE-3 for a
    leading call turn (S12)."""
    if v.rule == "S12":
        return _relabel(v, "GE-3", GE3_CALL_TEXT)
    if v.rule == "OAI-2":
        return _relabel(v, "GE-2", GE2_TEXT)
    if v.rule == "OAI-1":
        call_id = ctx.message(v.index).get("tool_call_id")
        declared_before = any(
            c.get("id") == call_id
            for _, msg in _dicts(ctx.messages[: v.index]) if msg.get("role") == "assistant"
            for _, c in _calls(msg)
        )
        if declared_before:  # the name is found, so the turn order is what is wrong
            return _relabel(v, "GE-3", GE3_RESPONSE_TEXT)
        turn, part = ctx.turn(v.index)
        return _relabel(v, "GE-1", f"* GenerateContentRequest.contents[{turn}].parts[{part}].function_response.name: "
                        "Name cannot be empty.")
    return v


# --------------------------------------------------------------------------------------------------
# OpenRouter to Gemini 3: GE-8
# --------------------------------------------------------------------------------------------------

_GEMINI_3 = re.compile(r"gemini-(?:[3-9]|[1-9][0-9])")
GE8_PREFIX = ("Gemini models require OpenRouter reasoning details to be preserved in each request. Please refer to our "
              "docs: https://openrouter.ai/docs/guides/best-practices/reasoning-tokens#preserving-reasoning-blocks. "
              "Upstream error: ")


def gemini_3(model: Any) -> bool:
    """Whether ``model`` (after any ``org/`` prefix) is Gemini 3 or later."""
    return isinstance(model, str) and _GEMINI_3.match(model.lower().rpartition("/")[2]) is not None


def _signatures(details: Any) -> list[Any]:
    return [d for d in details if isinstance(d, dict) and d.get("type") == "reasoning.encrypted"] if isinstance(details, list) else []


def _ge8_reasoning_details(ctx: _Ctx) -> list[Violation]:
    """GE-8: to a Gemini 3 model, a call turn of the current turn whose calls were emitted with ``reasoning_details``
    must carry the emitted ``reasoning.encrypted`` entries.  Needs ``emitted_signatures`` ({id: reasoning_details})."""
    emitted = ctx.emitted_signatures
    if not emitted or not gemini_3(ctx.body.get("model")):
        return []
    start = max((n + 1 for n, msg in _dicts(ctx.messages) if msg.get("role") == "user"), default=0)
    out = []
    for n, msg in _dicts(ctx.messages[start:]):
        n += start
        if msg.get("role") != "assistant":
            continue
        sent = _signatures(msg.get("reasoning_details"))
        for _, call in _calls(msg):
            call_id = call.get("id")
            wanted = _signatures(emitted.get(call_id)) if isinstance(call_id, str) else []
            if all(signature in sent for signature in wanted):
                continue
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            upstream = {"error": {"code": 400, "message": (
                "Function call is missing a thought_signature in functionCall parts. This is required for tools to "
                "work correctly, and missing thought_signature may lead to degraded model performance. Additional "
                f"data, function call `default_api:{name}` , position {ctx.turn(n)[0] + 1}. Please refer to "
                "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."), "status": "INVALID_ARGUMENT"}}
            out.append(Violation("GE-8", GE8_PREFIX + json.dumps(upstream, indent=2) + "\n",
                                 f"messages[{n}].reasoning_details", n, None, ("GE-4",)))
            break
    return out


# --------------------------------------------------------------------------------------------------
# Ollama: OL-1
# --------------------------------------------------------------------------------------------------


def _ol1_nil_content(ctx: _Ctx) -> list[Violation]:
    """OL-1 (E-CT-EMPTY): ``content: null`` - or no ``content`` key, which Go decodes to the same nil - on
    any message, tool-call turns included."""
    return [Violation("OL-1", "invalid message content type: <nil>", f"messages[{n}].content", n, None,
                      ("E-CT-EMPTY", "OAI-9"))
            for n, msg in _dicts(ctx.messages) if msg.get("content") is None]


# --------------------------------------------------------------------------------------------------
# xAI: XA-1, XA-2
# --------------------------------------------------------------------------------------------------


def _xa1_content_element(ctx: _Ctx) -> list[Violation]:
    """XA-1 (E-CT-EMPTY, S10): every message needs a content element - ``null``, ``[]`` or no ``content`` key
    is rejected (tool-call turns included; ``""`` works)."""
    return [Violation("XA-1", "Invalid request content: Each message must have at least one content element.",
                      f"messages[{n}].content", n, None, ("E-CT-EMPTY", "S10"))
            for n, msg in _dicts(ctx.messages) if msg.get("content") is None or msg.get("content") == []]


def _serde_error(text: str) -> str:
    """serde_json-like ``Error("...", line: L, column: C)`` for unparsable ``text`` (approximation)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        lines = text.split("\n")
        eof = (len(lines), len(lines[-1]))
        if exc.msg.startswith("Unterminated string"):
            return f'Error("EOF while parsing a string", line: {eof[0]}, column: {eof[1]})'
        if exc.pos >= len(text.rstrip()):
            stack: list[str] = []
            in_string = escaped = False
            for ch in text:
                if in_string:
                    escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
                elif ch == '"':
                    in_string = True
                elif ch in "[{":
                    stack.append(ch)
                elif ch in "]}" and stack:
                    stack.pop()
            what = {"{": "an object", "[": "a list"}.get(stack[-1] if stack else "", "a value")
            return f'Error("EOF while parsing {what}", line: {eof[0]}, column: {eof[1]})'
        return f'Error("{exc.msg}", line: {exc.lineno}, column: {exc.colno})'
    except (ValueError, RecursionError) as exc:
        return f'Error("{exc}", line: 1, column: 0)'
    return ""


def _xai_translate(v: Violation, ctx: _Ctx) -> Violation | None:
    """XA-2 (S7): xAI's text for arguments that do not parse as JSON.  A content-less assistant (S10 with the
    MI-6 text: no ``content`` key or ``[]``) is XA-1's business."""
    if v.rule == "S10" and v.message == _MI6_TEXT:
        return None
    if v.rule == "S7":
        _, call = _call_of(ctx, v)
        function = call.get("function")
        arguments = function.get("arguments") if isinstance(function, dict) else ""
        return _relabel(v, "XA-2", f"The arguments to a tool_call with ID '{call.get('id') or ''}' are not a valid "
                        f"JSON string. Parsing error: {_serde_error(arguments if isinstance(arguments, str) else '')}")
    return v


# --------------------------------------------------------------------------------------------------
# Groq (Cerebras, Fireworks): GR-1, GR-2, GR-3
# --------------------------------------------------------------------------------------------------

_GROQ_SUGGESTIONS = {"reasoning": "role"}  # the one observed "did you mean" suggestion


def _groq(n: int, role: str, items: list[str]) -> str:
    return f"'messages.{n}' : for 'role:{role}' the following must be satisfied[{', '.join(items)}]"


def _gr1_closed_schema(ctx: _Ctx) -> list[Violation]:
    """GR-1 (E-MI-3, CE-1, FW-1): properties outside the OpenAI message schema are unsupported (message keys
    and keys inside ``tool_calls[]`` / ``function``); one violation per message listing them all."""
    out = []
    for n, msg in _dicts(ctx.messages):
        role = msg.get("role")
        allowed = OPENAI_FIELDS.get(role) if isinstance(role, str) else None
        if allowed is None:
            continue
        items = [_groq_item(f"messages.{n}", key) for key in msg if key not in allowed]
        if role == "assistant":
            for k, call in _calls(msg):
                items += [_groq_item(f"messages.{n}.tool_calls.{k}", key)
                          for key in call if key not in OPENAI_FIELDS["tool_call"]]
                function = call.get("function")
                if isinstance(function, dict):
                    items += [_groq_item(f"messages.{n}.tool_calls.{k}.function", key)
                              for key in function if key not in OPENAI_FIELDS["function"]]
        if items:
            out.append(Violation("GR-1", _groq(n, role, items), f"messages.{n}", n, None, ("E-MI-3",)))
    return out


def _groq_item(path: str, key: str) -> str:
    hint = f", did you mean '{_GROQ_SUGGESTIONS[key]}'?" if key in _GROQ_SUGGESTIONS else ""
    return f"('{path}' : property '{key}' is unsupported{hint})"


def _gr2_string_content(ctx: _Ctx) -> list[Violation]:
    """GR-2 (S9): system (and developer) content must be a string (tool content: the base S9, relabelled)."""
    return [Violation("GR-2", _groq(n, msg["role"], [f"('messages.{n}.content' : value must be a string)"]),
                      f"messages.{n}.content", n, None, ("S9",))
            for n, msg in _dicts(ctx.messages)
            if msg.get("role") in ("system", "developer") and isinstance(msg.get("content"), list)]


def _groq_translate(v: Violation, ctx: _Ctx) -> Violation | None:
    """Groq's texts: GR-2 (tool content a string, same text as S9), GR-3 (``tool_call_id`` missing)."""
    if v.rule == "S9":
        return _relabel(v, "GR-2")
    if v.rule == "OAI-3" and ctx.message(v.index).get("tool_call_id") is None:
        n = v.index
        return _relabel(v, "GR-3", _groq(n, "tool", [f"('messages.{n}.tool_call_id' : property 'tool_call_id' is "
                                                     "missing)"]), param=f"messages.{n}.tool_call_id")
    return v


# --------------------------------------------------------------------------------------------------
# vLLM / SGLang / TGI: VL-1, VL-2, VL-4
# --------------------------------------------------------------------------------------------------


def _vl4_content_key(ctx: _Ctx) -> list[Violation]:
    """VL-4 (E-CT-KEY, VL-6): the ``content`` key must be present on every message (TGI's VL-6 wording,
    without line/column - constructed)."""
    return [Violation("VL-4", f"Failed to deserialize the JSON body into the target type: messages[{n}]: missing "
                      "field `content`", f"messages[{n}].content", n, None, ("E-CT-KEY", "VL-6"))
            for n, msg in _dicts(ctx.messages) if "content" not in msg]


def _ot1_system_first(ctx: _Ctx) -> list[Violation]:
    """OT-1: Qwen's and other chat templates take a system message only first (the template's own text)."""
    return [Violation("OT-1", "System message must be at the beginning.", f"messages[{n}].role", n, None)
            for n, msg in _dicts(ctx.messages) if n > 0 and msg.get("role") == "system"]


def _vllm_translate(v: Violation, ctx: _Ctx) -> Violation | None:
    """VL-1: unparsable arguments (``json.loads``'s message); ``""`` is turned into ``{}`` and accepted."""
    if v.rule == "S7":
        if "XA-2" in v.related:
            return None
        return _relabel(v, "VL-1")
    return v


# --------------------------------------------------------------------------------------------------
# profiles and public API
# --------------------------------------------------------------------------------------------------

Check = Callable[[_Ctx], list[Violation]]


@dataclass(frozen=True)
class _Profile:
    skip: frozenset[str] = frozenset()
    schema: tuple[Check, ...] = ()
    shape: tuple[Check, ...] = ()
    sequence: tuple[Check, ...] = ()
    translate: Callable[[Violation, _Ctx], Violation | None] | None = None


_NOT_UNIVERSAL = frozenset({"S12", "VL-2", "OAI-8"})
#: S9 (tool content an array of text parts) is refused by Groq, Mistral and vLLM only (GR-2, MI-9); OpenAI takes it (OAI-10).
_TEXT_PARTS = frozenset({"S9"})

_PROFILES: dict[str, _Profile] = {
    "openai": _Profile(skip=frozenset({"S12", "VL-2"}) | _TEXT_PARTS),
    "mistral": _Profile(
        skip=_NOT_UNIVERSAL | {"OAI-1", "OAI-2", "S5"},
        schema=(_mi7_closed_schema,),
        shape=(_mi4_call_ids, _mi8_names),
        sequence=(_mi1_role_order, _mi2_mi3_counting, _mi5_last_role),
        translate=_mistral_translate,
    ),
    "deepseek": _Profile(skip=_NOT_UNIVERSAL | _TEXT_PARTS, shape=(_ds3_reasoning_content,), translate=_deepseek_translate),
    "anthropic": _Profile(skip=_NOT_UNIVERSAL | _TEXT_PARTS, schema=(_an6_tool_call_keys,), shape=(_an4_empty_text,),
                          translate=_anthropic_translate),
    "gemini": _Profile(skip=frozenset({"VL-2", "OAI-8", "OAI-9"}) | _TEXT_PARTS, schema=(_ge6_null_content,),
                       shape=(_ge4_thought_signature,), translate=_gemini_translate),
    "ollama": _Profile(skip=_NOT_UNIVERSAL | _TEXT_PARTS | {"OAI-9"}, schema=(_ol1_nil_content,)),
    "xai": _Profile(skip=_NOT_UNIVERSAL | _TEXT_PARTS | {"OAI-9"}, shape=(_xa1_content_element,), translate=_xai_translate),
    "groq": _Profile(skip=_NOT_UNIVERSAL, schema=(_gr1_closed_schema, _gr2_string_content),
                     translate=_groq_translate),
    "vllm": _Profile(skip=frozenset({"S12", "OAI-8"}), schema=(_vl4_content_key,), sequence=(_ot1_system_first,),
                     translate=_vllm_translate),
    "openrouter": _Profile(skip=frozenset({"S12", "VL-2"}) | _TEXT_PARTS, shape=(_ge8_reasoning_details,)),
}


def _profile(provider: str) -> _Profile:
    try:
        return _PROFILES[provider]
    except KeyError:
        raise ValueError(f"unknown provider {provider!r}; choose one of: {', '.join(PROVIDERS)}") from None


def provider_violations(
    body: Any,
    provider: str,
    skip: Collection[str] = (),
    *,
    emitted_signatures: Mapping[str, Any] | None = None,
) -> list[Violation]:
    """All violations ``provider`` reports for the request ``body`` (first = what it answers).

    ``skip``: further rule ids to leave out (matched against the primary ``rule`` before and after
    translation).  ``emitted_signatures``: gemini - ``{call_id: extra_content}`` of the calls the upstream
    emitted with a thought signature (GE-4); openrouter - ``{call_id: reasoning_details}`` of the turns the
    upstream emitted with reasoning details (GE-8).
    """
    profile = _profile(provider)
    base = violations(body, skip=profile.skip | set(skip))
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return base  # BASE body problems: nothing else can be checked
    ctx = _Ctx(body, emitted_signatures)
    base_shape: list[Violation] = []
    sequence: list[Violation] = []
    for v in base:
        target = sequence if v.rule in _BASE_SEQUENCE else base_shape
        translated = profile.translate(v, ctx) if profile.translate else v
        if translated is not None:
            target.append(translated)
    schema = [v for check in profile.schema for v in check(ctx)]
    shape = [v for check in profile.shape for v in check(ctx)]
    sequence += [v for check in profile.sequence for v in check(ctx)]
    schema.sort(key=lambda v: v.index if v.index is not None else -1)  # stable
    shape.sort(key=lambda v: v.index if v.index is not None else -1)
    sequence.sort(key=lambda v: v.index if v.index is not None else -1)
    found: list[Violation] = []
    seen: set[tuple] = set()
    for v in schema + base_shape + shape + sequence:
        key = (v.rule, v.index, v.message, v.param)
        if v.rule in skip or key in seen:
            continue
        seen.add(key)
        found.append(v)
    return found


def provider_first(body: Any, provider: str, skip: Collection[str] = (), *,
                   emitted_signatures: Mapping[str, Any] | None = None) -> Violation | None:
    """The violation ``provider`` answers for ``body`` (None when it accepts the request)."""
    found = provider_violations(body, provider, skip, emitted_signatures=emitted_signatures)
    return found[0] if found else None


_MISTRAL_TYPES = {"MI-1": "invalid_request_message_order", "MI-2": "invalid_request_message_order",
                  "MI-3": "invalid_request_message_order", "MI-5": "invalid_request_message_order"}


def provider_error(body: Any, provider: str, skip: Collection[str] = (), *,
                   emitted_signatures: Mapping[str, Any] | None = None) -> tuple[int, Any] | None:
    """``(HTTP status, error body)`` that ``provider`` answers for ``body``, or None when it is valid."""
    found = provider_violations(body, provider, skip, emitted_signatures=emitted_signatures)
    if not found:
        return None
    v = found[0]
    if provider == "mistral":
        if v.rule == "MI-7":
            detail = [{"type": "extra_forbidden", "loc": [int(p) if p.isdigit() else p for p in x.param.split(".")],
                       "msg": "Extra inputs are not permitted", "input": _at(body, x.param.split(".")[1:])}
                      for x in found if x.rule == "MI-7"]
            return 422, {"object": "error", "message": {"detail": detail}, "type": "invalid_request_error",
                         "param": None, "code": None}
        return 400, {"object": "error", "message": v.message, "type": _MISTRAL_TYPES.get(v.rule, "invalid_request_error"),
                     "param": None, "code": v.code if v.rule.startswith("MI-") else None}
    if provider == "deepseek":
        return 400, {"error": {"message": v.message, "type": "invalid_request_error", "param": None,
                               "code": "invalid_request_error"}}
    if provider == "gemini":
        return 400, [{"error": {"code": 400, "message": v.message, "status": "INVALID_ARGUMENT"}}]
    if provider == "openrouter" and v.rule == "GE-8":
        return 400, {"error": {"message": "Provider returned error", "code": 400,
                               "metadata": {"raw": v.message, "provider_name": "Google AI Studio"}}}
    if provider == "xai":
        return 400, {"code": "Client specified an invalid argument", "error": v.message}
    if provider == "vllm":
        return 400, {"error": {"message": v.message, "type": "BadRequestError", "param": None, "code": 400}}
    return 400, {"error": {"message": v.message, "type": "invalid_request_error", "param": v.param, "code": v.code}}


def _at(body: Any, path: list[str]) -> Any:
    """The value at a MI-7 ``loc`` (without ``body``): ``messages.N.<role>.<key>...``; the role tag is skipped."""
    value: Any = body
    for i, p in enumerate(path):
        if i == 2:
            continue  # pydantic's discriminator tag (the role), not a key
        if isinstance(value, list) and p.isdigit() and int(p) < len(value):
            value = value[int(p)]
        elif isinstance(value, dict):
            value = value.get(p)
        else:
            return None
    return value
