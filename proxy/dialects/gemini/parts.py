"""The vocabulary of a Gemini history: contents (``{role, parts}``) and the parts the rules read.

A *call part* holds a ``functionCall`` object (``{name, args, id?}``), a *response part* a ``functionResponse``
(``{name, response, id?}``); ``thoughtSignature`` sits on the part, beside either, or on a text part. A *call
content* is a ``model`` content with a call part; a *response content* a user content whose parts are all response
parts. A content without ``role`` is the user's (the API takes it so for a single turn).
"""

from typing import Any

CALL = "functionCall"
RESPONSE = "functionResponse"
SIGNATURE = "thoughtSignature"
MODEL = "model"
USER = "user"


def function_call(part: Any) -> dict[str, Any] | None:
    """The part's ``functionCall`` object, if it is a call part."""
    call = part.get(CALL) if type(part) is dict else None
    return call if type(call) is dict else None


def function_response(part: Any) -> dict[str, Any] | None:
    """The part's ``functionResponse`` object, if it is a response part."""
    response = part.get(RESPONSE) if type(part) is dict else None
    return response if type(response) is dict else None


def name_of(value: dict[str, Any]) -> str | None:
    """A call's or response's ``name`` when it is a non-empty string."""
    name = value.get("name")
    return name if type(name) is str and name else None


def id_of(value: dict[str, Any]) -> str | None:
    """A call's or response's ``id`` when it is a non-empty string."""
    key = value.get("id")
    return key if type(key) is str and key else None


def parts_of(content: Any) -> list[Any] | None:
    """A content's ``parts`` when it is a content with a parts list; else None (not ours to judge)."""
    parts = content.get("parts") if type(content) is dict else None
    return parts if type(parts) is list else None


def role_of(content: dict[str, Any]) -> Any:
    """A content's role, ``user`` when it has none."""
    return content.get("role", USER)


def is_response_content(content: Any) -> bool:
    """A user content made of response parts only (at least one)."""
    parts = parts_of(content)
    if not parts or content.get("role", USER) != USER:
        return False
    for part in parts:  # noqa: SIM110 - a loop, no generator made: rules ask this of every user content
        if type(part) is not dict or type(part.get(RESPONSE)) is not dict:
            return False
    return True


def with_parts(content: dict[str, Any], parts: list[Any]) -> dict[str, Any]:
    """A copy of ``content`` holding ``parts``."""
    return {**content, "parts": parts}


def current_turn(contents: list[Any]) -> int:
    """Where the current turn starts: just after the last user content that says something besides function
    responses (Gemini checks the thought signatures of the calls from there on, GN-11)."""
    for index in range(len(contents) - 1, -1, -1):  # from the end: the turn is the history's tail
        content = contents[index]
        if type(content) is dict and content.get("role", USER) == USER and type(parts := content.get("parts")) is list and any(
                function_response(part) is None for part in parts):
            return index + 1
    return 0


def first_call(parts: list[Any]) -> dict[str, Any] | None:
    """The first call part of a content's parts: the one that carries its step's signature (GN-11)."""
    return next((part for part in parts if function_call(part) is not None), None)
