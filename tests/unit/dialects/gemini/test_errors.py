"""toolmend's own errors to a Gemini client come in Google's envelope, with the status name Google gives the code."""

import orjson
import pytest

from proxy.dialects.gemini.errors import google_error


@pytest.mark.parametrize(("status", "name"), [(400, "INVALID_ARGUMENT"), (401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED"),
                                              (404, "NOT_FOUND"), (408, "DEADLINE_EXCEEDED"), (412, "FAILED_PRECONDITION"), (413, "INVALID_ARGUMENT"),
                                              (429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (502, "UNAVAILABLE"), (503, "UNAVAILABLE"),
                                              (504, "DEADLINE_EXCEEDED"), (599, "INTERNAL")])
def test_the_envelope_names_the_status(status: int, name: str) -> None:
    response = google_error(status, "toolmend TM610 (unsigned-call) at contents[1]: refused", param="contents[1]", code="toolmend_x",
                            headers={"retry-after": "1"})
    assert response.status_code == status and response.headers["content-type"] == "application/json"
    assert response.headers["retry-after"] == "1"
    assert orjson.loads(response.body) == {"error": {"code": status, "message": "toolmend TM610 (unsigned-call) at contents[1]: refused",
                                                     "status": name}}
