"""A strict Gemini ``generateContent`` request validator, as a pure function.

It plays GN-1 .. GN-12 of the Gemini catalogue: every violation names its GN id, the HTTP status (400), Google's
status name (``INVALID_ARGUMENT``) and Google's error text with the real positions (``contents[2].parts[0]``)
substituted, in the Developer API's or Vertex AI's wording as the target's family asks. Where the catalogue gives
one wording only (GN-10's empty text: Vertex's), both families use it.

Order (what :func:`check` reports first), like a server that validates the schema before the conversation:

    1. shape, in content and part order: GN-10 (no contents, empty parts, empty text without a signature), GN-5
       (roles), GN-7 (empty names), GN-9 (ids where the endpoint refuses them);
    2. sequence, in content order: GN-4 (a model content with responses), GN-3 (a call content after a model content
       or first), GN-8 (one id twice in a content), GN-1 (the content after a call content: one response part per
       call, nothing else), GN-7 (a response answering no call of it, by id or name), GN-2 (responses after no call
       content), GN-6 (a history ending with a call content; with ``prefill=False``, a server that refuses any history
       ending with a model content, as Antigravity's Code Assist backend does, in its wording);
    3. thought signatures, for Gemini 3 and later (``target.signs_calls``): GN-11 (the first call part of each
       call content of the current turn carries one, or another part of it does, as a stream may send it), GN-12 (each one in the current turn is one the server minted,
       or Google's documented dummy value).
"""

from __future__ import annotations

import base64
import binascii
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.dialects.gemini.parts import CALL, MODEL, RESPONSE, SIGNATURE, USER, current_turn
from proxy.dialects.gemini.rules.unsigned_call import DUMMY
from proxy.dialects.gemini.target import DEVELOPER, GeminiTarget

__all__ = ["ServerState", "Violation", "check", "violations"]

INVALID = "Request contains an invalid argument."
GN1 = "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
GN2 = "Please ensure that function response turn comes immediately after a function call turn."
GN3 = "Please ensure that function call turn comes immediately after a user turn or after a function response turn."
GN4 = ("Please ensure that function call turn contains at least one function_call part which can not be mixed with "
       "function_response parts.")
GN5 = "Please use a valid role: user, model."
GN6 = "Please ensure that multiturn requests ends with a user role or a function response."
GN6_CODE_ASSIST = "Requests ending with a model turn are not supported"
GN10_CONTENTS = "* GenerateContentRequest.contents: contents is not specified"
GN10_EMPTY_TEXT = ("Unable to submit request because it has an empty text parameter. Add a value to the parameter and try "
                   "again. Learn more: https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/gemini")
GN12 = "Corrupted thought signature."
GN12_VERTEX = ("Unable to submit request because Thought signature is not valid.. Learn more: "
               "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/thought-signatures")


@dataclass(frozen=True)
class Violation:
    rule: str
    message: str
    status: int = 400
    status_name: str = "INVALID_ARGUMENT"

    def error_body(self) -> bytes:
        return orjson.dumps({"error": {"code": self.status, "message": self.message, "status": self.status_name}})


@dataclass
class ServerState:
    """The thought signatures the server minted (what a remembered answer carried)."""

    minted: set[str] = field(default_factory=set)

    def mint(self, parts: list[Any]) -> None:
        self.minted.update(part[SIGNATURE] for part in parts if type(part) is dict and type(part.get(SIGNATURE)) is str)


def _gn11(n: int, name: Any, vertex: bool) -> Violation:
    if vertex:
        return Violation("GN-11", f"Unable to submit request because function call `default_api:{name}` in the {n + 1}. content "
                                  "block is missing a `thought_signature`. Learn more: "
                                  "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/thought-signatures")
    return Violation("GN-11", "Function call is missing a thought_signature in functionCall parts. This is required for tools to "
                              "work correctly, and missing thought_signature may lead to degraded model performance. Additional "
                              f"data, function call `default_api:{name}` , position {n + 1}. Please refer to "
                              "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")


def _part_shape(n: int, k: int, part: Any, target: GeminiTarget) -> Violation | None:
    if type(part) is not dict or not part:
        return Violation("GN-10", f"* GenerateContentRequest.contents[{n}].parts[{k}].data: required oneof field 'data' must have one initialized field")
    if part.get("text") == "" and SIGNATURE not in part and CALL not in part and RESPONSE not in part:
        return Violation("GN-10", GN10_EMPTY_TEXT)
    for key, field_name in ((CALL, "function_call"), (RESPONSE, "function_response")):
        value = part.get(key)
        if value is None:
            continue
        if type(value) is not dict:
            return Violation("BASE", INVALID)
        name = value.get("name")
        if type(name) is not str or not name:
            return Violation("GN-7", f"* GenerateContentRequest.contents[{n}].parts[{k}].{field_name}.name: Name cannot be empty.")
        if "id" in value and not target.takes_ids:
            return Violation("GN-9", f"Invalid JSON payload received. Unknown name \"id\" at 'contents[{n}].parts[{k}].{field_name}': Cannot find field.")
    return None


def _shape(contents: Any, target: GeminiTarget) -> Violation | None:
    if type(contents) is not list or not contents:
        return Violation("GN-10", GN10_CONTENTS)
    for n, content in enumerate(contents):
        if type(content) is not dict:
            return Violation("BASE", INVALID)
        if content.get("role", USER) not in (USER, MODEL):
            return Violation("GN-5", GN5)
        parts = content.get("parts")
        if type(parts) is not list or not parts:
            return Violation("GN-10", f"* GenerateContentRequest.contents[{n}].parts: contents.parts must not be empty.")
        for k, part in enumerate(parts):
            if (found := _part_shape(n, k, part, target)) is not None:
                return found
    return None


def _answers(calls: list[dict[str, Any]], responses: list[dict[str, Any]]) -> bool:
    """Each response answers one call: by id when it has one, else by name; each call once."""
    by_id = {call["id"]: call["name"] for call in calls if type(call.get("id")) is str}
    names = Counter(call["name"] for call in calls)
    for response in responses:
        rid = response.get("id")
        if rid is not None and (rid not in by_id or by_id.pop(rid) != response["name"]):
            return False
        names[response["name"]] -= 1
        if names[response["name"]] < 0:
            return False
    return True


def _turn_order(contents: list[dict[str, Any]]) -> Violation | None:
    """GN-4 and GN-3, over every content before any pairing is judged."""
    for n, content in enumerate(contents):
        if content.get("role", USER) != MODEL:
            continue
        parts = content["parts"]
        if any(RESPONSE in part for part in parts):
            return Violation("GN-4", GN4)
        if any(CALL in part for part in parts) and (n == 0 or contents[n - 1].get("role", USER) == MODEL):
            return Violation("GN-3", GN3)
    return None


def _sequence(contents: list[dict[str, Any]]) -> Violation | None:
    if (found := _turn_order(contents)) is not None:
        return found
    for n, content in enumerate(contents):
        parts = content["parts"]
        calls = [part[CALL] for part in parts if CALL in part]
        responses = [part[RESPONSE] for part in parts if RESPONSE in part]
        previous = contents[n - 1] if n else None
        if content.get("role", USER) == MODEL:
            if responses:
                return Violation("GN-4", GN4)
            if not calls:
                continue
            if previous is None or previous.get("role", USER) == MODEL:
                return Violation("GN-3", GN3)
            ids = [call["id"] for call in calls if "id" in call]
            if len(ids) != len(set(ids)):
                return Violation("GN-8", INVALID)
            after = contents[n + 1] if n + 1 < len(contents) else None
            if after is None:
                return Violation("GN-6", GN6)
            answers = [part.get(RESPONSE) for part in after["parts"]]
            if after.get("role", USER) != USER or len(answers) != len(calls) or None in answers:
                return Violation("GN-1", GN1)
            if not _answers(calls, answers):  # type: ignore[arg-type]
                return Violation("GN-7", INVALID)
        elif responses and not (previous is not None and previous.get("role", USER) == MODEL and any(CALL in part for part in previous["parts"])):
            return Violation("GN-2", GN2)
    return None


def _is_base64(value: Any) -> bool:
    if type(value) is not str:
        return False
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _signatures(contents: list[dict[str, Any]], target: GeminiTarget, state: ServerState | None) -> Violation | None:
    vertex = target.family == "vertex"
    for n in range(current_turn(contents), len(contents)):
        content = contents[n]
        if content.get("role") != MODEL:
            continue
        first = next((part for part in content["parts"] if CALL in part), None)
        # A signature the model sent on another part of the content (a stream's later empty text part) is taken as the
        # model gave it (unverified live; toolmend leaves such a content as sent).
        if first is not None and all(part.get(SIGNATURE) is None for part in content["parts"]):
            return _gn11(n, first[CALL]["name"], vertex)
        for part in content["parts"]:
            signature = part.get(SIGNATURE)
            if signature is None or signature == DUMMY:
                continue
            if not _is_base64(signature) or (state is not None and signature not in state.minted):
                return Violation("GN-12", GN12_VERTEX if vertex else GN12)
    return None


def violations(body: Any, target: GeminiTarget = DEVELOPER, state: ServerState | None = None, *, prefill: bool = True) -> list[Violation]:
    """What the server refuses in ``body`` (at most one: it stops at the first), for ``target``; ``prefill``: whether it
    takes a history that ends with the model's text."""
    contents = body.get("contents") if type(body) is dict else None
    found = _shape(contents, target)
    if found is None:
        found = _sequence(contents)  # type: ignore[arg-type]
    if found is None and not prefill and contents[-1].get("role", USER) == MODEL:  # type: ignore[index]
        found = Violation("GN-6", GN6_CODE_ASSIST)
    if found is None and target.signs_calls:
        found = _signatures(contents, target, state)  # type: ignore[arg-type]
    return [found] if found is not None else []


def check(body: Any, target: GeminiTarget = DEVELOPER, state: ServerState | None = None, *, prefill: bool = True) -> Violation | None:
    """The first violation in ``body``, or None when the server takes it."""
    found = violations(body, target, state, prefill=prefill)
    return found[0] if found else None
