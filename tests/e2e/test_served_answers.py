"""What a client sees of a real ``toolmend serve`` process beyond the body: one ``Date`` per answer, and a
text log that client-supplied values cannot forge lines or fields in."""

import json
import re
import socket

import httpx

from tests.support.client_tls import TLS
from tests.support.processes import ProxyProcess
from tests.support.strict_upstream import Recorder

FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
FORGED_LINE = "2026-01-01 00:00:00,000 INFO toolmend.access request request_id=forged status=200 tenant=deadbeef"


def raw_head(port: int, request: bytes) -> list[bytes]:
    """The header lines of the answer to one raw HTTP/1.1 request (Connection: close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
    return received.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]


def test_every_answer_carries_one_date_header(strict_upstream: tuple[str, Recorder]) -> None:
    url, _ = strict_upstream
    with ProxyProcess(url + "/v1", "--memory", "memory://") as proxy:
        body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
        requests = {
            "passthrough": b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "chat": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%b" % (len(body), body),
            "toolmend's own": b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        }
        for what, request in requests.items():
            head = raw_head(proxy.port, request)
            dates = [line for line in head if line.lower().startswith(b"date:")]
            assert len(dates) == 1, (what, head)


def fields_of(access_line: str) -> dict[str, str]:
    """A text access line's ``key=value`` fields, JSON-quoted values decoded; a key twice fails the test."""
    found: dict[str, str] = {}
    for key, value in FIELD.findall(access_line.split(" toolmend.access request ", 1)[1]):
        assert key not in found, f"{key} twice in {access_line!r}"
        found[key] = json.loads(value) if value.startswith('"') else value
    return found


def test_text_log_cannot_be_forged_by_path_or_request_id(strict_upstream: tuple[str, Recorder]) -> None:
    url, _ = strict_upstream
    with ProxyProcess(url + "/v1", "--memory", "memory://", "--log-format", "text") as proxy:
        forged = httpx.get(proxy.url + "/v1/models%0A" + FORGED_LINE.replace(" ", "%20"), timeout=10, verify=TLS)
        spoofed_id = "abc status=200 tenant=deadbeef"
        spoofed = httpx.get(proxy.url + "/v1/models", headers={"x-request-id": spoofed_id}, timeout=10, verify=TLS)
        kept = httpx.get(proxy.url + "/v1/models", headers={"x-request-id": "req_0f3a-9b.1:x"}, timeout=10, verify=TLS)
        proxy.stop()
        log = proxy.log()
    assert not any(line.startswith("2026-01-01") for line in log.splitlines())  # no line of the client's making
    access = [fields_of(line) for line in log.splitlines() if " toolmend.access " in line]
    assert len(access) == 3, log
    assert access[0]["path"] == "/v1/models\n" + FORGED_LINE and access[0]["status"] == str(forged.status_code)
    # A request id that is not a plain token is replaced, not echoed or logged.
    assert spoofed.headers["x-toolmend-request-id"] != spoofed_id
    assert access[1]["request_id"] == spoofed.headers["x-toolmend-request-id"] and "tenant" not in access[1]
    assert kept.headers["x-toolmend-request-id"] == "req_0f3a-9b.1:x" == access[2]["request_id"]
