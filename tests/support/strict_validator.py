"""A strict OpenAI-compatible provider's request validator, as a pure function.

It implements the *strict profile* of ``docs/provider-rules.md``: the OpenAI rules of section 1.1
(OAI-1 .. OAI-11) merged with the universal rules S1 .. S13 of section 3.1, plus the OpenAI extras
E-ID-40 and E-TOOL-IMG.  Every violation names its rule id and carries the provider's error text with the
real index / ids substituted (section 1 texts; where a rule has no documented text, the OpenAI wording of the
same validator family is used and the helper says so as "constructed").

Ordering (what :func:`first_error` reports): like a provider that validates the request schema before the
message sequence, all *shape* violations (types, required fields, content, tool-call entries, ids) come
first, in message order; then the *sequence* violations (pairing S1/S2/S3, S5, S12), in message order.

Rule-to-check map (one small function per rule, each docstring names it):

    BASE (section 0)      _base_*            body / messages / message object / role schema
    OAI-11, S11           _oai11_*, _s11_*   legacy function role / function_call key
    OAI-9, S10            _oai9_*, _s10_*    null / empty content
    OAI-10, S9            _oai10_*, _s9_*    content types, tool content must be a plain string
    E-TOOL-IMG            _e_tool_img        image parts in a tool message
    OAI-3                 _oai3_*            tool_call_id required
    OAI-4, S8             _oai4_empty        tool_calls: []
    S6, OAI-5/6/7, AN-5   _s6_*, _oai5_*, _oai6_*, _oai7_*   tool-call entry shape
    OAI-8, E-ID-40        _oai8_id_too_long  id longer than 40
    S7                    _s7_*              arguments must be a JSON object text
    S4                    _s4_*              call id declared twice in the request
    OAI-1, S2             _oai1_orphan       tool message outside its call's block
    OAI-2, S1, S3         _oai2_unanswered   declared id not answered inside its block
    S5                    _s5_duplicate_result
    S12                   _s12_leading_call  first tool-call turn has no preceding user turn
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["Violation", "violations", "first_error", "ROLES", "MAX_CALL_ID_LENGTH"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
MAX_CALL_ID_LENGTH = 40  # OAI-8 / E-ID-40
IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule.

    ``rule`` is the primary rule id ("OAI-2", "S4", ...), ``related`` the other ids the same check covers
    (e.g. ("S1", "S3") for OAI-2).  ``message`` is the provider's error text, ``param`` the provider's
    ``param`` field, ``index`` the offending message index (None for body-level problems), ``code`` the
    OpenAI error ``code`` where the provider documents one.
    """

    rule: str
    message: str
    param: str | None = None
    index: int | None = None
    code: str | None = None
    related: tuple[str, ...] = ()

    @property
    def rules(self) -> tuple[str, ...]:
        return (self.rule, *self.related)


def _json_type(value: Any) -> str:
    """OpenAI's wording for a JSON value's type ("an object", "an array", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "an unknown type"


def _missing_parameter(rule: str, path: str, index: int | None, related: tuple[str, ...] = ()) -> Violation:
    """OpenAI's "Missing required parameter" wording (OAI-5 / OAI-10 family)."""
    return Violation(rule, f"Missing required parameter: '{path}'.", path, index, "missing_required_parameter", related)


def _invalid_type(
    rule: str, path: str, expected: str, value: Any, index: int | None, related: tuple[str, ...] = ()
) -> Violation:
    """OpenAI's "Invalid type" wording (OAI-6 / OAI-10 family)."""
    return Violation(
        rule,
        f"Invalid type for '{path}': expected {expected}, but got {_json_type(value)} instead.",
        path,
        index,
        "invalid_type",
        related,
    )


# --------------------------------------------------------------------------------------------------
# BASE: section 0 schema (body, messages array, message objects, roles)
# --------------------------------------------------------------------------------------------------


def _base_body(body: Any) -> Violation | None:
    """BASE (section 0): the body is an object with a non-empty ``messages`` array.

    Texts: OpenAI wording of the same validator family (constructed; "empty array" as in OAI-4).
    """
    if not isinstance(body, dict):
        return _invalid_type("BASE", "body", "an object", body, None)
    if "messages" not in body:
        return _missing_parameter("BASE", "messages", None)
    messages = body["messages"]
    if not isinstance(messages, list):
        return _invalid_type("BASE", "messages", "an array", messages, None)
    if not messages:
        return Violation(
            "BASE",
            "Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            "messages",
            None,
            "empty_array",
        )
    return None


def _base_message_object(n: int, msg: Any) -> Violation | None:
    """BASE (section 0): every message is an object (constructed OpenAI wording)."""
    if isinstance(msg, dict):
        return None
    return _invalid_type("BASE", f"messages[{n}]", "an object", msg, n)


def _base_role(n: int, msg: dict) -> Violation | None:
    """BASE (section 0) and OAI-11/S11: ``role`` is a string in system/developer/user/assistant/tool.

    ``role: "function"`` gets the OAI-11 text (code ``unsupported_value``); other unknown roles get OpenAI's
    enum wording (constructed).
    """
    role = msg.get("role", _MISSING)
    path = f"messages[{n}].role"
    if role is _MISSING:
        return _missing_parameter("BASE", path, n)
    if not isinstance(role, str):
        return _invalid_type("BASE", path, "a string", role, n)
    if role in ROLES:
        return None
    if role == "function":
        return _oai11_function_role(n)
    return Violation(
        "BASE",
        f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', "
        "'tool', and 'developer'.",
        path,
        n,
        "invalid_value",
    )


# --------------------------------------------------------------------------------------------------
# OAI-11 / S11: legacy function calling
# --------------------------------------------------------------------------------------------------


def _oai11_function_role(n: int) -> Violation:
    """OAI-11 (S11, AZ-3): legacy ``role: "function"`` is rejected."""
    return Violation(
        "OAI-11",
        f"Unsupported value: 'messages[{n}].role' does not support 'function' with this model.",
        f"messages[{n}].role",
        n,
        "unsupported_value",
        ("S11",),
    )


def _oai11_function_call(n: int, msg: dict, role: str) -> Violation | None:
    """OAI-11 / S11: a ``function_call`` key on any message.

    Non-assistant messages get OAI-11's "only messages with role 'assistant'" text.  On an assistant the
    strict profile still rejects it (S11: o-series / newer Azure / closed schemas); no verbatim text is
    documented, so OpenAI's "Unsupported parameter" wording is constructed.  The key counts even when its
    value is null (the brief: "function_call key on any message").
    """
    if "function_call" not in msg:
        return None
    path = f"messages[{n}].function_call"
    if role != "assistant":
        return Violation(
            "OAI-11",
            "Invalid parameter: only messages with role 'assistant' can have a function call.",
            path,
            n,
            None,
            ("S11",),
        )
    return Violation(
        "S11",
        f"Unsupported parameter: '{path}' is not supported with this model.",
        path,
        n,
        "unsupported_parameter",
        ("OAI-11",),
    )


# --------------------------------------------------------------------------------------------------
# Content: OAI-9 / S10, OAI-10 / S9, E-TOOL-IMG
# --------------------------------------------------------------------------------------------------


def _oai9_null_content(n: int) -> Violation:
    """OAI-9 (S10, S9): ``content: null`` outside an assistant message with tool calls."""
    return Violation(
        "OAI-9",
        "Invalid value for 'content': expected a string, got null.",
        f"messages.[{n}].content",
        n,
        None,
        ("S10",),
    )


def _base_missing_content(n: int) -> Violation:
    """BASE (section 0): ``content`` is required on system/developer/user/tool messages."""
    return _missing_parameter("BASE", f"messages[{n}].content", n)


def _s10_no_content(n: int) -> Violation:
    """S10 (MI-6): an assistant without tool calls has no content at all (key missing or ``[]``)."""
    return Violation(
        "S10",
        "Assistant message must have either content or tool_calls, but not none.",
        f"messages.[{n}].content",
        n,
        None,
        ("MI-6",),
    )


def _s10_empty_content(n: int) -> Violation:
    """S10 (AN-4): an assistant without tool calls whose content is ``""`` or only empty text parts.

    OpenAI itself accepted this (OAI-12); the strict profile is the merge, so it is rejected with the
    Anthropic(-backed) text.
    """
    return Violation(
        "S10",
        "messages: text content blocks must be non-empty",
        f"messages.[{n}].content",
        n,
        None,
        ("AN-4",),
    )


def _oai10_content_type(n: int, content: Any) -> Violation:
    """OAI-10 (S9): content is neither a string nor an array (QW-3 same text)."""
    return _invalid_type(
        "OAI-10", f"messages[{n}].content", "one of a string or array of objects", content, n, ("S9",)
    )


def _oai10_part(n: int, m: int, part: Any) -> Violation | None:
    """OAI-10 (S9): each content part is an object with a string ``type``."""
    path = f"messages[{n}].content[{m}]"
    if not isinstance(part, dict):
        return _invalid_type("OAI-10", path, "an object", part, n, ("S9",))
    part_type = part.get("type", _MISSING)
    if part_type is _MISSING or part_type is None:
        return _missing_parameter("OAI-10", f"{path}.type", n, ("S9",))
    if not isinstance(part_type, str):
        return _invalid_type("OAI-10", f"{path}.type", "a string", part_type, n, ("S9",))
    return None


def _oai10_image_outside_user(n: int, role: str) -> Violation:
    """OAI-10: image parts are only allowed in user messages (OpenAI's text, role substituted)."""
    return Violation(
        "OAI-10",
        f"Invalid 'messages[{n}]'. Image URLs are only allowed for messages with role 'user', "
        f"but this message with role '{role}' contains an image URL.",
        f"messages[{n}]",
        n,
    )


def _e_tool_img(n: int) -> Violation:
    """E-TOOL-IMG (OAI-10): an image part inside a tool message."""
    return Violation(
        "E-TOOL-IMG",
        f"Invalid 'messages[{n}]'. Image URLs are only allowed for messages with role 'user', "
        "but this message with role 'tool' contains an image URL.",
        f"messages[{n}]",
        n,
        None,
        ("OAI-10",),
    )


def _s9_tool_content_not_string(n: int) -> Violation:
    """S9 (GR-2, MI-9): a tool message's content must be a plain string (strict profile)."""
    return Violation(
        "S9",
        f"'messages.{n}' : for 'role:tool' the following must be satisfied"
        f"[('messages.{n}.content' : value must be a string)]",
        f"messages.{n}.content",
        n,
        None,
        ("GR-2",),
    )


def _is_empty_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and part.get("text") in ("", None)


def _check_content(n: int, msg: dict, role: str, has_calls: bool, out: list[Violation]) -> None:
    """Content rules for one message: BASE, OAI-9, OAI-10, S9, S10, E-TOOL-IMG."""
    content = msg.get("content", _MISSING)
    if content is _MISSING:
        if role != "assistant":
            out.append(_base_missing_content(n))
        elif not has_calls:
            out.append(_s10_no_content(n))
        return
    if content is None:
        if not (role == "assistant" and has_calls):
            out.append(_oai9_null_content(n))
        return
    if isinstance(content, str):
        if content == "" and role == "assistant" and not has_calls:
            out.append(_s10_empty_content(n))
        return
    if not isinstance(content, list):
        out.append(_oai10_content_type(n, content))
        return

    has_image = False
    for m, part in enumerate(content):
        bad = _oai10_part(n, m, part)
        if bad is not None:
            out.append(bad)
        elif part["type"] in IMAGE_PART_TYPES:
            has_image = True
    if has_image and role != "user":
        out.append(_e_tool_img(n) if role == "tool" else _oai10_image_outside_user(n, role))
    if role == "tool":
        out.append(_s9_tool_content_not_string(n))
    elif role == "assistant" and not has_calls:
        if not content:
            out.append(_s10_no_content(n))
        elif all(_is_empty_text_part(p) for p in content):
            out.append(_s10_empty_content(n))


# --------------------------------------------------------------------------------------------------
# Tool messages: OAI-3
# --------------------------------------------------------------------------------------------------


def _oai3_tool_call_id(n: int, msg: dict, out: list[Violation]) -> str | None:
    """OAI-3 (AZ-5, GR-3, S2): a tool message carries a string ``tool_call_id``; returns it or None."""
    call_id = msg.get("tool_call_id")
    if call_id is None:
        out.append(
            Violation(
                "OAI-3",
                "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.",
                f"messages.[{n}].tool_call_id",
                n,
                None,
                ("S2",),
            )
        )
        return None
    if not isinstance(call_id, str):
        out.append(_invalid_type("OAI-3", f"messages[{n}].tool_call_id", "a string", call_id, n, ("S2",)))
        return None
    return call_id


# --------------------------------------------------------------------------------------------------
# Assistant tool calls: OAI-4/S8, S6 (OAI-5/6/7, AN-5), OAI-8/E-ID-40, S7, S4
# --------------------------------------------------------------------------------------------------


def _oai4_empty(n: int) -> Violation:
    """OAI-4 (S8, DS-6): ``tool_calls: []``."""
    return Violation(
        "OAI-4",
        f"Invalid 'messages[{n}].tool_calls': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.",
        f"messages[{n}].tool_calls",
        n,
        "empty_array",
        ("S8",),
    )


def _s6_call_id(n: int, k: int, call: dict, out: list[Violation]) -> str | None:
    """S6 (AN-5) and OAI-8/E-ID-40: ``id`` is a non-empty string of at most 40 characters.

    Returns the id when it is a non-empty string (a too-long id still pairs with its results).
    """
    path = f"messages[{n}].tool_calls[{k}].id"
    call_id = call.get("id")
    if call_id is None:
        out.append(_missing_parameter("S6", path, n, ("AN-5",)))
        return None
    if not isinstance(call_id, str):
        out.append(_invalid_type("S6", path, "a string", call_id, n, ("AN-5",)))
        return None
    if call_id == "":
        out.append(
            Violation(
                "S6",
                f"Invalid '{path}': empty string. Expected a string with minimum length 1, "
                "but got an empty string instead.",
                path,
                n,
                None,
                ("AN-5",),
            )
        )
        return None
    if len(call_id) > MAX_CALL_ID_LENGTH:
        out.append(_oai8_id_too_long(path, n, call_id))
    return call_id


def _oai8_id_too_long(path: str, n: int, call_id: str) -> Violation:
    """OAI-8 (E-ID-40, AZ-2): tool-call id longer than 40 characters."""
    return Violation(
        "OAI-8",
        f"Invalid '{path}': string too long. Expected a string with maximum length {MAX_CALL_ID_LENGTH}, "
        f"but got a string with length {len(call_id)} instead.",
        path,
        n,
        "string_above_max_length",
        ("E-ID-40",),
    )


def _oai5_type(n: int, k: int, call: dict) -> Violation | None:
    """OAI-5 (S6, AZ-4): ``type`` is required and must be ``"function"``."""
    path = f"messages[{n}].tool_calls[{k}].type"
    call_type = call.get("type")
    if call_type is None:
        return _missing_parameter("OAI-5", path, n, ("S6",))
    if call_type == "custom" and isinstance(call.get("custom"), dict):
        return None  # OpenAI custom tools: {"type": "custom", "custom": {"name", "input"}}
    if call_type != "function":
        # constructed: OpenAI's enum wording
        shown = call_type if isinstance(call_type, str) else json.dumps(call_type)
        return Violation(
            "OAI-5", f"Invalid value: '{shown}'. Supported values are: 'function'.", path, n, "invalid_value", ("S6",)
        )
    return None


def _oai7_name(n: int, k: int, function: dict) -> Violation | None:
    """OAI-7 (S6): ``function.name`` is a non-empty string."""
    path = f"messages[{n}].tool_calls[{k}].function.name"
    name = function.get("name")
    if name is None:
        return _missing_parameter("OAI-7", path, n, ("S6",))
    if not isinstance(name, str):
        return _invalid_type("OAI-7", path, "a string", name, n, ("S6",))
    if name == "":
        return Violation(
            "OAI-7",
            f"Invalid '{path}': empty string. Expected a string with minimum length 1, "
            "but got an empty string instead.",
            path,
            n,
            None,
            ("S6",),
        )
    return None


def _oai6_arguments(n: int, k: int, function: dict) -> Violation | str:
    """OAI-6 (S6): ``function.arguments`` is present and a string; returns the string when it is."""
    path = f"messages[{n}].tool_calls[{k}].function.arguments"
    arguments = function.get("arguments", _MISSING)
    if arguments is _MISSING:
        return _missing_parameter("OAI-6", path, n, ("S6",))
    if not isinstance(arguments, str):
        return _invalid_type("OAI-6", path, "a string", arguments, n, ("S6",))
    return arguments


_JINJA_TYPE = {str: "'str object'", list: "'list object'", int: "'int object'", float: "'float object'",
               bool: "'bool object'", type(None): "'None'"}


def _s7_arguments_json(n: int, k: int, call_id: str | None, arguments: str) -> Violation | None:
    """S7 (XA-2, VL-1, VL-2, VL-3): ``arguments`` is JSON text of an object.

    ``""`` gets xAI's XA-2 text; other unparsable text gets vLLM's VL-1 text (``json.loads``'s message,
    e.g. ``Expecting ',' delimiter: line 1 column 54 (char 53)``); valid JSON that is not an object gets
    SGLang's VL-2 template error.
    """
    path = f"messages[{n}].tool_calls[{k}].function.arguments"
    if arguments == "":
        return Violation(
            "S7",
            f"The arguments to a tool_call with ID '{call_id or ''}' are not a valid JSON string. "
            'Parsing error: Error("EOF while parsing a value", line: 1, column: 0)',
            path,
            n,
            None,
            ("XA-2",),
        )
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return Violation("S7", str(exc), path, n, None, ("VL-1",))
    except (ValueError, RecursionError) as exc:  # e.g. absurd nesting depth
        return Violation("S7", f"Failed to parse tool call arguments as JSON: {exc}", path, n, None, ("VL-3",))
    if not isinstance(value, dict):
        # Only vLLM/SGLang chat templates need an object (VL-2); the universal S7 wants valid JSON.
        return Violation(
            "VL-2", f"{_JINJA_TYPE.get(type(value), repr(type(value).__name__))} has no attribute 'items'",
            path, n, None, ("S7",),
        )
    return None


def _s6_call(n: int, k: int, call: Any, out: list[Violation]) -> str | None:
    """S6: one ``tool_calls`` entry is ``{id, type: "function", function: {name, arguments}}``.

    Runs OAI-5/6/7/8 and S7 on the entry; returns its id when usable for pairing.
    """
    if not isinstance(call, dict):
        out.append(_invalid_type("S6", f"messages[{n}].tool_calls[{k}]", "an object", call, n))
        return None
    call_id = _s6_call_id(n, k, call, out)
    bad_type = _oai5_type(n, k, call)
    if bad_type is not None:
        out.append(bad_type)
    if call.get("type") == "custom" and isinstance(call.get("custom"), dict):
        return call_id
    function = call.get("function")
    path = f"messages[{n}].tool_calls[{k}].function"
    if function is None:
        out.append(_missing_parameter("S6", path, n))
        return call_id
    if not isinstance(function, dict):
        out.append(_invalid_type("S6", path, "an object", function, n))
        return call_id
    bad_name = _oai7_name(n, k, function)
    if bad_name is not None:
        out.append(bad_name)
    arguments = _oai6_arguments(n, k, function)
    if isinstance(arguments, Violation):
        out.append(arguments)
    else:
        bad_json = _s7_arguments_json(n, k, call_id, arguments)
        if bad_json is not None:
            out.append(bad_json)
    return call_id


def _s4_duplicate_in_message(n: int, k: int, call_id: str, has_text: bool) -> Violation:
    """S4 (AN-3): the same id twice in one assistant message.

    AN-3 text; the Anthropic content index is the call index, shifted by one when the message also has
    text (the text becomes content block 0 after conversion).
    """
    return Violation(
        "S4",
        f"messages.{n}.content.{k + (1 if has_text else 0)}: tool_use ids must be unique",
        f"messages[{n}].tool_calls[{k}].id",
        n,
        None,
        ("AN-3",),
    )


def _s4_duplicate_in_request(n: int, k: int, call_id: str) -> Violation:
    """S4 (MM-2): an id already declared by an earlier assistant message of the request."""
    return Violation(
        "S4",
        f"invalid params, duplicate tool_call id: {call_id}",
        f"messages[{n}].tool_calls[{k}].id",
        n,
        None,
        ("MM-2",),
    )


def _check_tool_calls(
    n: int, msg: dict, declared_anywhere: set[str], out: list[Violation]
) -> list[str] | None:
    """OAI-4/S8, S6, S4 for one assistant message.

    Returns the usable declared ids (in order) when ``tool_calls`` is a non-empty array, else None.
    ``tool_calls: null`` is treated as absent.
    """
    calls = msg.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        out.append(_invalid_type("S6", f"messages[{n}].tool_calls", "an array", calls, n))
        return None
    if not calls:
        out.append(_oai4_empty(n))
        return None
    content = msg.get("content")
    has_text = isinstance(content, str) and content != "" or isinstance(content, list) and bool(content)
    ids: list[str] = []
    in_message: set[str] = set()
    for k, call in enumerate(calls):
        call_id = _s6_call(n, k, call, out)
        if call_id is None:
            continue
        if call_id in in_message:
            out.append(_s4_duplicate_in_message(n, k, call_id, has_text))
            continue
        if call_id in declared_anywhere:
            out.append(_s4_duplicate_in_request(n, k, call_id))
        in_message.add(call_id)
        declared_anywhere.add(call_id)
        ids.append(call_id)
    return ids


# --------------------------------------------------------------------------------------------------
# Sequence: OAI-1/S2, OAI-2/S1/S3, S5, S12
# --------------------------------------------------------------------------------------------------


def _oai1_orphan(n: int) -> Violation:
    """OAI-1 (S2, S12): a tool message outside the block of its call.

    First message, after a user/system/developer/plain-assistant message, or answering an id the block's
    opening assistant did not declare.
    """
    return Violation(
        "OAI-1",
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
        "'tool_calls'.",
        f"messages.[{n}].role",
        n,
        None,
        ("S2",),
    )


def _oai2_unanswered(n: int, missing: list[str]) -> Violation:
    """OAI-2 (S1, S3): declared ids with no tool message before the next non-tool message / the end."""
    return Violation(
        "OAI-2",
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}",
        f"messages.[{n}].role",
        n,
        None,
        ("S1", "S3"),
    )


def _s5_duplicate_result(n: int, call_id: str) -> Violation:
    """S5 (MI-3, KI-3): a second tool message answering the same id in one block."""
    return Violation(
        "S5",
        f"Duplicate tool call id {call_id} in tool results",
        f"messages.[{n}].tool_call_id",
        n,
        None,
        ("MI-3",),
    )


def _s12_leading_call(n: int) -> Violation:
    """S12 (GE-3): the first assistant tool-call turn has no user message before it."""
    return Violation(
        "S12",
        "Please ensure that function call turn comes immediately after a user turn or after a function "
        "response turn.",
        f"messages.[{n}].role",
        n,
        None,
        ("GE-3",),
    )


class _Blocks:
    """Tracks the open tool block (S1/S2/S3/S5) during the single pass over the messages."""

    __slots__ = ("out", "opener", "declared", "answered")

    def __init__(self, out: list[Violation]) -> None:
        self.out = out
        self.opener: int | None = None
        self.declared: dict[str, None] = {}
        self.answered: set[str] = set()

    def open(self, n: int, ids: list[str]) -> None:
        self.close()
        self.opener = n
        self.declared = dict.fromkeys(ids)
        self.answered = set()

    def close(self) -> None:
        if self.opener is None:
            return
        missing = [call_id for call_id in self.declared if call_id not in self.answered]
        if missing:
            self.out.append(_oai2_unanswered(self.opener, missing))
        self.opener = None

    def tool(self, n: int, call_id: str | None) -> None:
        if self.opener is None:
            self.out.append(_oai1_orphan(n))
        elif call_id is None:
            return  # OAI-3 already reported; the message still belongs to the block
        elif call_id not in self.declared:
            self.out.append(_oai1_orphan(n))
        elif call_id in self.answered:
            self.out.append(_s5_duplicate_result(n, call_id))
        else:
            self.answered.add(call_id)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def violations(body: Any, skip: Collection[str] = ()) -> list[Violation]:
    """All strict-profile violations of a ``/v1/chat/completions`` request body (shape first, then sequence).

    ``skip``: rule ids to leave out (matched against the primary ``rule`` only), e.g. ``("S12",)`` to play
    a provider that accepts a history opening with a tool-call turn (OpenAI does; Gemini does not).
    """
    found = _all_violations(body)
    if skip:
        found = [v for v in found if v.rule not in skip]
    return found


def _all_violations(body: Any) -> list[Violation]:
    """One pass over the messages: every rule above, shape and sequence collected separately."""
    bad_body = _base_body(body)
    if bad_body is not None:
        return [bad_body]
    shape: list[Violation] = []
    sequence: list[Violation] = []
    blocks = _Blocks(sequence)
    declared_anywhere: set[str] = set()
    seen_user = False
    seen_call_turn = False

    for n, msg in enumerate(body["messages"]):
        bad = _base_message_object(n, msg) or _base_role(n, msg)
        if bad is not None:
            shape.append(bad)
            blocks.close()
            continue
        role = msg["role"]
        bad = _oai11_function_call(n, msg, role)
        if bad is not None:
            shape.append(bad)

        if role == "tool":
            call_id = _oai3_tool_call_id(n, msg, shape)
            _check_content(n, msg, role, False, shape)
            blocks.tool(n, call_id)
            continue

        ids = _check_tool_calls(n, msg, declared_anywhere, shape) if role == "assistant" else None
        has_calls = ids is not None or (role == "assistant" and "function_call" in msg)
        _check_content(n, msg, role, has_calls, shape)
        if ids is None:
            blocks.close()
            seen_user = seen_user or role == "user"
            continue
        if not seen_call_turn and not seen_user:
            sequence.append(_s12_leading_call(n))
        seen_call_turn = True
        blocks.open(n, ids)
    blocks.close()

    sequence.sort(key=lambda v: v.index if v.index is not None else -1)  # stable
    return shape + sequence


def first_error(body: Any, skip: Collection[str] = ()) -> dict | None:
    """The OpenAI error body a strict provider answers (HTTP 400) for ``body``, or None when it is valid."""
    found = violations(body, skip)
    if not found:
        return None
    v = found[0]
    return {"error": {"message": v.message, "type": "invalid_request_error", "param": v.param, "code": v.code}}
