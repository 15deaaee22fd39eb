"""Capture amplification: what toolmend keeps, and how long other clients wait, when an upstream answers a call
padded with millions of empty objects (under --max-capture-bytes), and when a later request recalls that call.

For each scenario the upstream answers one request with a tool call and ``--padding`` empty objects beside it
(``{}`` entries: Responses output items, Messages content blocks, Chat tool calls; for the Messages stream, the
padding is the call's own streamed input), then answers a second request, whose history holds the call's result
but not the call, with a small answer: toolmend recalls the remembered turn to repair it. A client polls
``GET /healthz`` back to back throughout. Reported per scenario: the proxy's RSS before, at its peak and after
each request, and the /healthz latencies idle (1 s before) and while each request was in flight.

    python bench/capture_bomb.py                          # every scenario, 4,000,000 empty objects (~12 MB)
    python bench/capture_bomb.py --scenario responses-stream --padding 1000000
    python bench/capture_bomb.py --repo /tmp/old          # another checkout (e.g. `git archive` of an older commit)
    python bench/capture_bomb.py --memory sqlite          # the SQLite store instead of memory://

Everything binds to 127.0.0.1 on free ports; the upstream is a stdlib server in its own process. A fresh proxy
runs each scenario.
"""

import argparse
import http.client
import json
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loop_stall import Poller, summary  # noqa: E402
from procs import Proc, free_port, wait_http  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = ("responses-stream", "responses-json", "messages-stream", "messages-json", "chat-json")
START_TIMEOUT = 20.0
SETTLE_SECONDS = 1.0
CALL_ID = {"responses": "call_bomb", "messages": "toolu_bomb", "chat": "call_bomb"}


def sse(events: list[dict]) -> bytes:
    return b"".join(b"event: %s\ndata: %s\n\n" % (event["type"].encode(), json.dumps(event).encode()) for event in events)


def padding(count: int) -> str:
    return ",{}" * count


def bomb(scenario: str, count: int) -> tuple[str, bytes]:
    """The padded answer of ``scenario``: its content type and body."""
    if scenario.startswith("responses"):
        call = json.dumps({"type": "function_call", "id": "fc_bomb", "call_id": CALL_ID["responses"], "name": "f", "arguments": "{}"})
        output = f"[{call}{padding(count)}]"
        if scenario == "responses-json":
            return "application/json", f'{{"id":"resp_bomb","object":"response","status":"completed","output":{output}}}'.encode()
        head = sse([{"type": "response.created", "response": {"id": "resp_bomb", "object": "response", "output": []}}])
        completed = f'{{"type":"response.completed","response":{{"id":"resp_bomb","object":"response","output":{output}}}}}'
        return "text/event-stream", head + f"event: response.completed\ndata: {completed}\n\n".encode()
    if scenario.startswith("messages"):
        use = {"type": "tool_use", "id": CALL_ID["messages"], "name": "f", "input": {}}
        if scenario == "messages-json":
            body = f'{{"id":"msg_bomb","type":"message","role":"assistant","content":[{json.dumps(use)}{padding(count)}]}}'
            return "application/json", body.encode()
        events = [{"type": "message_start", "message": {"id": "msg_bomb", "type": "message", "role": "assistant", "content": []}},
                  {"type": "content_block_start", "index": 0, "content_block": use},
                  {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":[{}" + padding(count) + "]}"}},
                  {"type": "content_block_stop", "index": 0},
                  {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}, {"type": "message_stop"}]
        return "text/event-stream", sse(events)
    call = json.dumps({"id": CALL_ID["chat"], "type": "function", "function": {"name": "f", "arguments": "{}"}})
    body = (f'{{"id":"c","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":null,'
            f'"tool_calls":[{call}{padding(count)}]}},"finish_reason":"tool_calls"}}]}}')
    return "application/json", body.encode()


def small(scenario: str) -> bytes:
    if scenario.startswith("responses"):
        return b'{"id":"resp_2","object":"response","output":[{"type":"message","role":"assistant","content":[]}]}'
    if scenario.startswith("messages"):
        return b'{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}]}'
    return b'{"id":"c2","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}'


def requests(scenario: str) -> tuple[str, bytes, bytes]:
    """The path, the request that gets the padded answer, and the one that recalls its call."""
    dialect = scenario.split("-")[0]
    stream = scenario.endswith("stream")
    if dialect == "responses":
        first = {"model": "m", "stream": stream, "input": "bomb"}
        second = {"model": "m", "input": [{"role": "user", "content": "recall"},
                                          {"type": "function_call_output", "call_id": CALL_ID[dialect], "output": "ok"}]}
        return "/v1/responses", json.dumps(first).encode(), json.dumps(second).encode()
    if dialect == "messages":
        first = {"model": "m", "max_tokens": 10, "stream": stream, "messages": [{"role": "user", "content": "bomb"}]}
        second = {"model": "m", "max_tokens": 10, "messages": [
            {"role": "user", "content": "recall"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": CALL_ID[dialect], "content": "ok"}]}]}
        return "/v1/messages", json.dumps(first).encode(), json.dumps(second).encode()
    first = {"model": "m", "messages": [{"role": "user", "content": "bomb"}]}
    second = {"model": "m", "messages": [{"role": "user", "content": "recall"},
                                         {"role": "tool", "tool_call_id": CALL_ID[dialect], "content": "ok"}]}
    return "/v1/chat/completions", json.dumps(first).encode(), json.dumps(second).encode()


def serve_upstream(port: int, scenario: str, count: int) -> None:
    content_type, padded = bomb(scenario, count)

    class Upstream(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            answer, kind = (small(scenario), "application/json") if b"recall" in body else (padded, content_type)
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Upstream).serve_forever()


def memory_kb(pid: int) -> tuple[int, int]:
    """The process's resident memory now and at its peak (VmRSS, VmHWM), in KiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = value
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def post(port: int, path: str, body: bytes) -> tuple[int, str, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", path, body, {"content-type": "application/json", "authorization": "Bearer sk-bench",
                                      "x-api-key": "sk-bench", "anthropic-version": "2023-06-01"})
    response = conn.getresponse()
    size = len(response.read())
    conn.close()
    return response.status, response.getheader("x-toolmend-calls") or "-", size


def run(scenario: str, args: argparse.Namespace, rundir: Path) -> None:
    upstream_port, proxy_port = free_port(), free_port()
    upstream = Proc(f"upstream-{scenario}", [sys.executable, __file__, "--serve-upstream", str(upstream_port),
                                             "--scenario", scenario, "--padding", str(args.padding)], rundir, REPO)
    memory = "memory://" if args.memory == "memory" else f"sqlite:///{rundir}/{scenario}.db"
    proxy = Proc(f"toolmend-{scenario}", [sys.executable, "-m", "proxy", "serve", "--upstream", f"http://127.0.0.1:{upstream_port}/v1",
                                          "--host", "127.0.0.1", "--port", str(proxy_port), "--memory", memory],
                 rundir, args.repo)
    try:
        if (reason := wait_http(proxy_port, "/healthz", proxy, START_TIMEOUT)) is not None:
            sys.exit(f"the proxy did not start: {reason}")
        path, first, second = requests(scenario)
        poller = Poller(proxy_port)
        poller.start()
        time.sleep(SETTLE_SECONDS)
        before, _ = memory_kb(proxy.pid)
        started = time.monotonic()
        status, _, size = post(proxy_port, path, first)
        answered = time.monotonic()
        time.sleep(SETTLE_SECONDS)
        kept, _ = memory_kb(proxy.pid)
        recall_started = time.monotonic()
        recall_status, calls, _ = post(proxy_port, path, second)
        recalled = time.monotonic()
        time.sleep(SETTLE_SECONDS)
        after, peak = memory_kb(proxy.pid)
        poller.stop.set()
        poller.join(120)
        print(f"{scenario}: answer HTTP {status} ({size / 1e6:.1f} MB) in {answered - started:.2f} s; "
              f"recall HTTP {recall_status} calls {calls} in {recalled - recall_started:.2f} s")
        print(f"  RSS before {before / 1024:.0f} MB, after the answer {kept / 1024:.0f} MB, after the recall "
              f"{after / 1024:.0f} MB, peak {peak / 1024:.0f} MB")
        print(f"  /healthz idle before:       {summary(poller.between(started - SETTLE_SECONDS, started))}")
        print(f"  /healthz during the answer: {summary(poller.between(started, answered))}")
        print(f"  /healthz during the recall: {summary(poller.between(recall_started, recalled))}", flush=True)
    finally:
        proxy.stop()
        upstream.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS, action="append", help="default: every one")
    parser.add_argument("--padding", type=int, default=4_000_000, help="empty objects in the padded answer")
    parser.add_argument("--memory", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose toolmend to run (default: this one)")
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream:
        serve_upstream(args.serve_upstream, args.scenario[0], args.padding)
        return 0
    print(f"{args.padding:,} empty objects per padded answer; toolmend from {args.repo}, --memory {args.memory}", flush=True)
    with tempfile.TemporaryDirectory(prefix="toolmend-bomb-") as rundir:
        for scenario in args.scenario or SCENARIOS:
            run(scenario, args, Path(rundir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
