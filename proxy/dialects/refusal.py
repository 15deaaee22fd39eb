"""The error object of an upstream's refusal, for the rules that answer one with a retry (AM-14, RS-11).

OpenAI and Anthropic both put what went wrong under ``error`` (``{"error": {"message": ..., "code": ...}}``, and
Anthropic's ``{"type": "error", "error": {...}}``); a refusal worth a retry is a 400.
"""

from typing import Any

import orjson

STATUS = 400


def error_object(status: int, error: bytes) -> dict[str, Any] | None:
    """The ``error`` object of an answer of status 400 whose body is a JSON error; else None."""
    if status != STATUS:
        return None
    try:
        parsed = orjson.loads(error)
    except orjson.JSONDecodeError:
        return None
    detail = parsed.get("error") if type(parsed) is dict else None
    return detail if type(detail) is dict else None
