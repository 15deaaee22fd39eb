"""``toolmend serve --log-format json``: every line on stderr is one JSON object, one per request, with no
secrets from headers or bodies."""

import json

import httpx

from tests.support.client_tls import TLS
from tests.support.processes import ProxyProcess
from tests.support.strict_upstream import Recorder

SECRET_KEY = "sk-live-DO-NOT-LOG-1234567890"
SECRET_TEXT = "my bank password is hunter2"


def test_json_log_lines_one_per_request_without_secrets(strict_upstream: tuple[str, Recorder], tmp_path) -> None:
    url, _ = strict_upstream
    with ProxyProcess(url + "/v1", "--log-format", "json", "--memory", "memory://") as proxy:
        for history in ([{"role": "user", "content": SECRET_TEXT}],
                        [{"role": "user", "content": SECRET_TEXT}, {"role": "tool", "tool_call_id": "call_q", "content": SECRET_TEXT}]):
            answer = httpx.post(proxy.url + "/v1/chat/completions?key=" + SECRET_KEY, timeout=10,
                                headers={"authorization": f"Bearer {SECRET_KEY}", "x-request-id": "req-json-1"},
                                json={"model": "m", "messages": history}, verify=TLS)
            assert answer.status_code == 200
        proxy.stop()  # a request's line is written after its answer is sent: stop first, so every line is in
        log = proxy.log()
    lines = [json.loads(line) for line in log.splitlines() if line.strip()]  # every line parses as JSON
    requests = [line for line in lines if line["logger"] == "toolmend.access" and line["path"] == "/v1/chat/completions"]
    assert len(requests) == 2 and all(line["request_id"] == "req-json-1" for line in requests)
    assert requests[1]["repairs"] == "TM101=1" and requests[1]["upstream_status"] == 200
    assert SECRET_KEY not in log and SECRET_TEXT not in log and "hunter2" not in log
