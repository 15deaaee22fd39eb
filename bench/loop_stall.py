"""Event-loop stall: how long other clients wait while toolmend repairs one very large broken history.

A client polls ``GET /healthz`` back to back while another sends a chat request carrying ``--calls``
tool calls (default 300,000, about 25 MB), every one of them missing its ``type`` and its result, so the
engine adds a type and a placeholder result to each. Reported: the repair request's time, and the
/healthz latencies (max, p99, median) before it (idle) and while it was in flight.

    python bench/loop_stall.py                      # toolmend from this checkout
    python bench/loop_stall.py --repo /tmp/old      # ... or from another checkout (e.g. `git archive` of an older commit)
    python bench/loop_stall.py --calls 100000

Everything binds to 127.0.0.1 on free ports; the upstream is a small stdlib server in its own process
that reads the request and answers a fixed completion. Only the standard library is used here.
"""

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import Proc, free_port, wait_http  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CALLS_PER_TURN = 3_000  # 100 turns for 300,000 calls
#: Each call counts against --max-messages (100,000 history entries by default): raised for the bench's calls.
MAX_MESSAGES = "10000000"
IDLE_SECONDS = 2.0
START_TIMEOUT = 20.0
ANSWER = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}).encode()


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        remaining = int(self.headers.get("content-length", "0"))
        while remaining:
            remaining -= len(self.rfile.read(min(remaining, 1 << 20)))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, *args: object) -> None:
        pass


def broken_body(calls: int) -> bytes:
    messages: list[dict] = [{"role": "user", "content": "Run every check."}]
    for first in range(0, calls, CALLS_PER_TURN):
        tool_calls = [{"id": f"call_{n:07d}", "function": {"name": "check", "arguments": "{}"}}
                      for n in range(first, min(first + CALLS_PER_TURN, calls))]
        messages += [{"role": "assistant", "content": None, "tool_calls": tool_calls}, {"role": "user", "content": "Next."}]
    return json.dumps({"model": "m", "messages": messages}, separators=(",", ":")).encode()


class Poller(threading.Thread):
    """GET /healthz back to back on one keep-alive connection, recording (sent at, latency)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        while not self.stop.is_set():
            started = time.monotonic()
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            self.samples.append((started, time.monotonic() - started))
        conn.close()

    def between(self, start: float, end: float) -> list[float]:
        return [latency for sent, latency in self.samples if start <= sent < end]


def summary(latencies: list[float]) -> str:
    if not latencies:
        return "no samples"
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (f"max {max(ordered) * 1000:8.1f} ms   p99 {p99 * 1000:7.1f} ms   median {statistics.median(ordered) * 1000:6.2f} ms"
            f"   ({len(ordered)} requests)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300_000)
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose toolmend to run (default: this one)")
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream:
        ThreadingHTTPServer(("127.0.0.1", args.serve_upstream), Upstream).serve_forever()
        return 0

    body = broken_body(args.calls)
    print(f"request: {args.calls:,} broken calls, {len(body) / 1e6:.1f} MB; toolmend from {args.repo}", flush=True)
    with tempfile.TemporaryDirectory(prefix="toolmend-stall-") as rundir:
        upstream_port, proxy_port = free_port(), free_port()
        upstream = Proc("upstream", [sys.executable, __file__, "--serve-upstream", str(upstream_port)], Path(rundir), REPO)
        proxy = Proc("toolmend", [sys.executable, "-m", "proxy", "serve", "--upstream", f"http://127.0.0.1:{upstream_port}/v1",
                                  "--host", "127.0.0.1", "--port", str(proxy_port), "--memory", "memory://",
                                  "--max-messages", MAX_MESSAGES],
                     Path(rundir), args.repo)
        try:
            if (reason := wait_http(proxy_port, "/healthz", proxy, START_TIMEOUT)) is not None:
                sys.exit(f"the proxy did not start: {reason}")
            poller = Poller(proxy_port)
            poller.start()
            time.sleep(IDLE_SECONDS)  # the idle baseline
            conn = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=600)
            started = time.monotonic()
            conn.request("POST", "/v1/chat/completions", body,
                         {"content-type": "application/json", "authorization": "Bearer sk-bench"})
            response = conn.getresponse()
            response.read()
            finished = time.monotonic()
            poller.stop.set()
            poller.join(120)
            repairs = response.getheader("x-toolmend-repairs") or "-"
            print(f"repair request: HTTP {response.status} in {finished - started:.2f} s, repairs {repairs}")
            print(f"/healthz idle:          {summary(poller.between(started - IDLE_SECONDS, started))}")
            print(f"/healthz during repair: {summary(poller.between(started, finished))}")
        finally:
            proxy.stop()
            upstream.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
