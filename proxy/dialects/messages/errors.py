"""Anthropic's error shape, so that a Messages client (the anthropic SDKs, Claude Code) reads toolmend's errors
as it reads Anthropic's: ``{"type": "error", "error": {"type": ..., "message": ...}}``.

The error ``type`` follows the status, as Anthropic's documentation lists them (docs.claude.com/en/api/errors:
400 ``invalid_request_error``, also for other 4XX, 401 ``authentication_error``, 403 ``permission_error``, 404
``not_found_error``, 413 ``request_too_large``, 429 ``rate_limit_error``, 500 ``api_error``, 529
``overloaded_error``) and the SDKs' error union (``billing_error`` for 402, ``timeout_error`` for a gateway
timeout). toolmend's own 5XX map onto that list: 502 (upstream unreachable) is ``api_error``, 503 (toolmend at
its connection limit) ``overloaded_error``, 504 (upstream timed out) ``timeout_error``. The SDKs retry 408, 409,
429 and every 5XX whatever the type, so the choice changes only what a client shows.

The ``type_``, ``param`` and ``code`` a caller passes are OpenAI's vocabulary; Anthropic's envelope has no place
for them, so they are left out (the message names the toolmend rule of a refused repair).
"""

import orjson
from starlette.responses import Response

#: Anthropic's error type for each status it documents; other 4XX are ``invalid_request_error``, other 5XX ``api_error``.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(status: int, message: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": error_type(status), "message": message}})


def anthropic_error(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                    code: str | None = None, headers: dict[str, str] | None = None) -> Response:
    """A :class:`proxy.errors.Render`: the error in Anthropic's envelope, its type by ``status``."""
    return Response(error_body(status, message), status, headers, media_type="application/json")
