"""Errors in the OpenAI error shape, so every client SDK surfaces them the way it surfaces OpenAI's."""

import orjson
from starlette.responses import Response


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
