"""Smoke test of the toolmend container image, against a real podman container (``.ci/container-smoke``).

    python -m tests.support.container_smoke --image localhost/toolmend:ci

Everything stays on this machine. The container publishes its port on loopback only
(``-p 127.0.0.1:PORT:8080``). Its upstream runs here on the host, in this process, bound to the gateway
address of podman's bridge network, which the container reaches as ``host.containers.internal`` (podman
maps that name to the bridge gateway when running as root): the strict test upstream
(:mod:`tests.support.strict_upstream`), plus a slow streaming route for requests carrying
``x-smoke-slow``.

Checks, in order: ``/healthz`` and ``/readyz``, and the image's own ``HEALTHCHECK``; the process is PID 1
(no init) and not root; a clean request reaches the upstream byte-identical; a history whose assistant
``tool_calls`` message was dropped is repaired with the exact calls the upstream made earlier
(``x-toolmend-repairs`` and what the upstream received); then SIGTERM while a slow stream is in flight:
new connections are refused, the stream completes, and the container exits with code 0 within 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import uvicorn

from tests.support.strict_upstream import Recorder, make_strict_upstream

SLOW_HEADER = b"x-smoke-slow"
SLOW_CHUNKS = 10
SLOW_INTERVAL = 0.2  # seconds between chunks: the stream lasts about 2 s
#: Seconds to wait for the container to exit after SIGTERM before calling it hung (the exit code, not the
#: time, says whether the shutdown was graceful: a forced stop exits 137).
STOP_HANG_GUARD = 60.0
AUTH = {"Authorization": "Bearer sk-container-smoke"}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]


class Failure(AssertionError):
    pass


def check(condition: Any, message: str) -> None:
    if not condition:
        raise Failure(message)


def say(message: str) -> None:
    print(f"container-smoke: {message}", flush=True)


# --- podman --------------------------------------------------------------------------------------------

def podman(*args: str, timeout: float = 60, check_rc: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check_rc and result.returncode != 0:
        raise Failure(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def bridge_gateway(network: str) -> str:
    """The host's address on a podman bridge network (what ``host.containers.internal`` resolves to)."""
    info = json.loads(podman("network", "inspect", network).stdout)
    for subnet in info[0].get("subnets") or []:
        gateway = subnet.get("gateway")
        if gateway and ":" not in gateway:
            return gateway
    raise Failure(f"podman network {network!r} has no IPv4 gateway: {info}")


# --- the upstream on the host --------------------------------------------------------------------------

def slow_stream_app():
    """OpenAI-shaped text stream, one chunk every SLOW_INTERVAL seconds, then ``[DONE]``."""

    async def app(scope, receive, send):
        more_body = True
        while more_body:  # the request body is not needed, only consumed
            message = await receive()
            more_body = message["type"] == "http.request" and message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        base = {"id": "chatcmpl-slow", "object": "chat.completion.chunk", "created": int(time.time()), "model": "slow"}
        for i in range(SLOW_CHUNKS):
            delta = {"role": "assistant", "content": ""} if i == 0 else {"content": f"part{i} "}
            event = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])
            await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(event) + b"\n\n", "more_body": True})
            await asyncio.sleep(SLOW_INTERVAL)
        event = dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
        await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(event) + b"\n\ndata: [DONE]\n\n",
                    "more_body": False})

    return app


def combined_upstream() -> tuple[Any, Recorder]:
    strict, recorder = make_strict_upstream(seed=5)
    slow = slow_stream_app()

    async def app(scope, receive, send):
        if scope["type"] == "http" and any(name == SLOW_HEADER for name, _ in scope["headers"]):
            await slow(scope, receive, send)
        else:
            await strict(scope, receive, send)

    return app, recorder


@contextmanager
def upstream_on(address: str) -> Iterator[tuple[int, Recorder]]:
    """Serve the upstream on ``address`` (a free port) in a thread; yields the port and the recorder.

    The socket is bound with IP_FREEBIND: podman creates its bridge, and so the gateway address, only when
    the first container joins the network, which is after this port must be known."""
    app, recorder = combined_upstream()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_FREEBIND", 15), 1)
    sock.bind((address, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2))
    server.install_signal_handlers = lambda: None  # older uvicorn; newer ones skip threads by themselves
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="smoke-upstream", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        check(thread.is_alive() and time.monotonic() < deadline, f"the test upstream did not start on {address}:{port}")
        time.sleep(0.01)
    try:
        yield port, recorder
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


# --- HTTP to the published port ------------------------------------------------------------------------

def free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
            timeout: float = 10) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        all_headers = {"Content-Type": "application/json", **AUTH, **(headers or {})}
        conn.request(method, path, body=data, headers=all_headers)
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def wait_healthy(port: int, container: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    last: Exception | str = "no answer"
    while time.monotonic() < deadline:
        try:
            status, _, body = request(port, "GET", "/healthz", timeout=2)
            if status == 200:
                return
            last = f"HTTP {status} {body[:200]!r}"
        except OSError as exc:
            last = exc
        state = podman("inspect", container, "--format", "{{.State.Status}}", check_rc=False).stdout.strip()
        if state not in ("running", "created", "configured", "initialized"):
            raise Failure(f"the container stopped while starting ({state}):\n{logs(container)}")
        time.sleep(0.2)
    raise Failure(f"/healthz did not answer 200 within {seconds:.0f} s ({last}):\n{logs(container)}")


def logs(container: str) -> str:
    result = podman("logs", container, check_rc=False)
    return (result.stdout + result.stderr).strip()


# --- the checks ----------------------------------------------------------------------------------------

def check_health(port: int, container: str) -> None:
    status, _, body = request(port, "GET", "/healthz")
    check(status == 200 and orjson.loads(body) == {"status": "ok"}, f"/healthz: {status} {body!r}")
    status, _, body = request(port, "GET", "/readyz")
    ready = orjson.loads(body) if status == 200 else {}
    check(ready.get("status") == "ready" and ready.get("memory", {}).get("backend") == "sqlite",
          f"/readyz: {status} {body!r} (expected ready, with the image's default SQLite memory)")
    result = podman("healthcheck", "run", container, check_rc=False)
    check(result.returncode == 0, f"the image's HEALTHCHECK failed ({result.returncode}): {result.stdout}{result.stderr}")
    say(f"/healthz, /readyz ({ready['memory']}) and the image HEALTHCHECK pass")


def check_process(container: str) -> None:
    uid = podman("exec", container, "id", "-u").stdout.strip()
    check(uid.isdigit() and int(uid) != 0, f"the container runs as uid {uid!r}, expected a non-root user")
    status = podman("exec", container, "cat", "/proc/1/status").stdout
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    check(all(u != "0" for u in uids), f"PID 1 has uids {uids}")
    cmdline = podman("exec", container, "cat", "/proc/1/cmdline").stdout.replace("\0", " ").strip()
    check("toolmend" in cmdline and "serve" in cmdline, f"PID 1 is {cmdline!r}, expected toolmend serve itself (no init)")
    say(f"PID 1 is {cmdline!r}, uid {uid} (not root)")


def check_repairs(port: int, container: str, recorder: Recorder) -> None:
    # A clean request: reaches the upstream as the very bytes sent, no repair header.
    clean = orjson.dumps({"model": "gpt-strict-test", "messages": [{"role": "user", "content": "Hello"}]})
    status, headers, body = request(port, "POST", "/v1/chat/completions", clean)
    check(status == 200, f"clean request: {status} {body[:300]!r}")
    check(headers.get("x-toolmend-repairs") is None, f"clean request was repaired: {headers.get('x-toolmend-repairs')}")
    check(recorder.last.body_bytes == clean, "the clean request did not reach the upstream byte-identical")

    # The agent's turn: the upstream answers with two parallel tool calls, which toolmend remembers.
    question = {"role": "user", "content": "Weather in Paris and Tokyo?"}
    status, _, body = request(port, "POST", "/v1/chat/completions",
                              {"model": "gpt-strict-test", "messages": [question], "tools": TOOLS})
    check(status == 200, f"tool-call request: {status} {body[:300]!r}")
    calls = orjson.loads(body)["choices"][0]["message"]["tool_calls"]
    check(len(calls) == 2, f"expected two tool calls, got {calls}")

    # The broken history: the framework dropped the assistant tool_calls message, kept both results.
    results = [{"role": "tool", "tool_call_id": c["id"], "content": f"{18 + i}C"} for i, c in enumerate(calls)]
    broken = {"model": "gpt-strict-test", "messages": [question, *results], "tools": TOOLS}
    status, headers, body = request(port, "POST", "/v1/chat/completions", broken)
    check(status == 200, f"broken history was not repaired: {status} {body[:300]!r}")
    repairs = headers.get("x-toolmend-repairs") or ""
    check(re.fullmatch(r"TM101=\d+", repairs), f"x-toolmend-repairs: {repairs!r}, expected TM101 (orphan tool message)")
    sent = recorder.last.json["messages"]
    check([m["role"] for m in sent] == ["user", "assistant", "tool", "tool"], f"upstream received roles {[m['role'] for m in sent]}")
    check(sent[1]["tool_calls"] == calls, f"re-inserted calls differ from the upstream's:\n{sent[1]['tool_calls']}\n{calls}")
    check(orjson.loads(body)["choices"][0]["message"]["content"] == "Received 2 tool results.", f"answer: {body[:300]!r}")
    check(not recorder.rejections, f"the strict upstream rejected something: {recorder.rejections}")
    # The image's default memory is a SQLite file on the /data volume, written by the non-root user.
    listing = podman("exec", container, "stat", "-c", "%u %s %n", "/data/memory.db", check_rc=False)
    check(listing.returncode == 0 and listing.stdout.split()[0] != "0",
          f"no /data/memory.db owned by the app user: {listing.stdout}{listing.stderr}")
    say(f"orphan tool results repaired with the remembered calls (x-toolmend-repairs: {repairs}), "
        f"remembered in /data/memory.db; clean request byte-identical")


class StreamReader(threading.Thread):
    """Reads one streamed chat completion through the proxy, noting when each event arrived."""

    def __init__(self, port: int) -> None:
        super().__init__(name="smoke-stream", daemon=True)
        self.port = port
        self.first_chunk = threading.Event()
        self.events: list[bytes] = []
        self.error: BaseException | None = None
        self.status: int | None = None
        self.finished_at: float | None = None

    def run(self) -> None:
        body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "Tell me slowly."}]}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        try:
            conn.request("POST", "/v1/chat/completions", body=orjson.dumps(body),
                         headers={"Content-Type": "application/json", "x-smoke-slow": "1", **AUTH})
            response = conn.getresponse()
            self.status = response.status
            buffer = b""
            while chunk := response.read1(65536):
                buffer += chunk
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    self.events.append(event)
                    self.first_chunk.set()
            check(not buffer.strip(), f"stream ended inside an event: {buffer[:200]!r}")
            self.finished_at = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            self.first_chunk.set()
            conn.close()


def check_graceful_stop(port: int, container: str) -> None:
    reader = StreamReader(port)
    reader.start()
    check(reader.first_chunk.wait(10) and reader.error is None and reader.events,
          f"the slow stream did not start: status {reader.status}, error {reader.error!r}")
    in_flight = len(reader.events)
    sent_at = time.monotonic()
    podman("kill", "--signal", "TERM", container)

    # No new connections once the signal is handled (uvicorn closes its listening socket first).
    refused: str | None = None
    deadline = sent_at + STOP_HANG_GUARD
    while time.monotonic() < deadline and refused is None and reader.is_alive():
        time.sleep(0.1)
        try:
            status, _, _ = request(port, "GET", "/healthz", timeout=1)
        except OSError as exc:
            refused = type(exc).__name__
    check(refused is not None, "new connections were still served after SIGTERM while the stream was in flight")

    waited = podman("wait", container, timeout=STOP_HANG_GUARD)
    elapsed = time.monotonic() - sent_at
    exit_code = int(waited.stdout.strip().splitlines()[-1])
    reader.join(timeout=5)
    check(exit_code == 0, f"exit code {exit_code} after SIGTERM (expected 0):\n{logs(container)}")
    check(reader.error is None, f"the in-flight stream broke off: {reader.error!r}")
    check(reader.status == 200, f"stream status {reader.status}")
    check(reader.events and reader.events[-1] == b"data: [DONE]", f"the stream did not complete: last events {reader.events[-2:]}")
    check(len(reader.events) == SLOW_CHUNKS + 2, f"{len(reader.events)} events, expected {SLOW_CHUNKS + 2}")
    check(reader.finished_at is not None and reader.finished_at - sent_at > SLOW_INTERVAL * 2,
          "the stream finished before SIGTERM could matter; the test proves nothing")
    text = logs(container)
    check("Traceback" not in text, f"a traceback in the container's log:\n{text}")
    say(f"SIGTERM with a stream in flight ({in_flight} of {SLOW_CHUNKS + 2} events sent): new connections refused "
        f"({refused}), stream completed, exit code 0 after {elapsed:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--network", default="podman", help="podman bridge network for the container")
    args = parser.parse_args()

    gateway = bridge_gateway(args.network)
    proxy_port = free_loopback_port()
    name = f"toolmend-smoke-{uuid.uuid4().hex[:8]}"
    with upstream_on(gateway) as (upstream_port, recorder):
        upstream = f"http://host.containers.internal:{upstream_port}/v1"
        say(f"container {name}: 127.0.0.1:{proxy_port} -> 8080, upstream {upstream} (host side {gateway})")
        podman("run", "--detach", "--name", name, "--network", args.network,
               "--publish", f"127.0.0.1:{proxy_port}:8080",
               "--env", f"TOOLMEND_UPSTREAM={upstream}", "--env", "TOOLMEND_LOG_LEVEL=info", args.image)
        try:
            wait_healthy(proxy_port, name)
            check_health(proxy_port, name)
            check_process(name)
            check_repairs(proxy_port, name, recorder)
            check_graceful_stop(proxy_port, name)
        except Failure:
            print(f"--- container log ---\n{logs(name)}", file=sys.stderr)
            raise
        finally:
            podman("rm", "--force", "--volumes", "--time", "0", name, check_rc=False)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as exc:
        print(f"container-smoke: FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
