"""Errors in the protocol's own shape, so every client SDK surfaces toolmend's errors the way it surfaces
its provider's: OpenAI's (Chat Completions, Responses) here, Anthropic's in ``proxy/dialects/messages``.
A ``Render`` is one such shape; every error toolmend makes goes through the one its endpoint uses."""

from typing import Protocol

import orjson
from starlette.responses import Response


class Render(Protocol):
    def __call__(self, status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None) -> Response: ...


def error_body(message: str, type_: str = "invalid_request_error", param: str | None = None, code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": param, "code": code}})


def error_response(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(error_body(message, type_, param, code), status, headers, media_type="application/json")
