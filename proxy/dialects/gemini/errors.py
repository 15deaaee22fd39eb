"""Google's error shape, so that a Gemini client (google-genai, Gemini CLI) reads toolmend's errors as it reads
Google's: ``{"error": {"code": 400, "message": ..., "status": "INVALID_ARGUMENT"}}``.

The ``status`` is the canonical ``google.rpc.Code`` name its HTTP status maps to (google/rpc/code.proto, AIP-193):
400 ``INVALID_ARGUMENT``, 401 ``UNAUTHENTICATED``, 403 ``PERMISSION_DENIED``, 404 ``NOT_FOUND``, 409 ``ABORTED``,
412 ``FAILED_PRECONDITION``, 429 ``RESOURCE_EXHAUSTED``, 499 ``CANCELLED``, 500 ``INTERNAL``, 501 ``UNIMPLEMENTED``, 503
``UNAVAILABLE``, 504 ``DEADLINE_EXCEEDED``; toolmend's others as their meaning maps: 408 (a slow body) and 504 are
``DEADLINE_EXCEEDED``, 502 (upstream unreachable) ``UNAVAILABLE``, any other 4XX ``INVALID_ARGUMENT`` (Google answers an
oversized payload so), any other 5XX ``INTERNAL``. The ``type_``, ``param``
and ``code`` a caller passes are OpenAI's vocabulary; Google's envelope has no place for them (the message names the
toolmend rule of a refused repair).
"""

import orjson
from starlette.responses import Response

STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    412: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def status_name(status: int) -> str:
    """The ``google.rpc.Code`` name of an HTTP status: other 4XX are ``INVALID_ARGUMENT``, other 5XX ``INTERNAL``."""
    return STATUSES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")


def error_body(status: int, message: str) -> bytes:
    return orjson.dumps({"error": {"code": status, "message": message, "status": status_name(status)}})


def google_error(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None) -> Response:
    """A :class:`proxy.errors.Render`: the error in Google's envelope, its status name by ``status``."""
    return Response(error_body(status, message), status, headers, media_type="application/json")
