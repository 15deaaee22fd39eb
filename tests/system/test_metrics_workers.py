"""With several workers, /metrics still adds up: every worker counts in its own files and whichever
worker answers /metrics sums them all (prometheus-client multiprocess mode)."""

import re
from pathlib import Path

import httpx

from tests.support.processes import HANG_GUARD, ProxyProcess, wait_until
from tests.support.strict_upstream import Recorder

REQUESTS = 24


def chat_count(text: str) -> float:
    match = re.search(r'^toolmend_requests_total\{route="chat",status="200"\} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def test_request_counts_add_up_across_two_workers(strict_upstream: tuple[str, Recorder], tmp_path: Path) -> None:
    url, _ = strict_upstream
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "XDG_STATE_HOME": str(tmp_path)}
    with ProxyProcess(url + "/v1", "--workers", "2", env=env) as proxy:
        for number in range(REQUESTS):  # a new connection each time, so both workers get some
            answer = httpx.post(proxy.url + "/v1/chat/completions", timeout=10,
                                json={"model": "m", "messages": [{"role": "user", "content": f"hi {number}"}]})
            assert answer.status_code == 200
        # Both workers wrote their own counter file...
        wait_until(lambda: len(list(metrics_dir.glob("counter_*.db"))) >= 2, HANG_GUARD, "a counter file per worker")
        # ...and every answer of /metrics, whichever worker gives it, has the total.
        for _ in range(6):
            assert chat_count(httpx.get(proxy.url + "/metrics", timeout=10).text) == REQUESTS
