#!/usr/bin/env python3
"""Per-chunk streaming delay added by a proxy.

A tiny SSE upstream (asyncio, 127.0.0.1, in this process) writes one chat.completion.chunk
every --interval ms; each carries the perf_counter_ns() at which it was written. A client in
the same process reads streams through the proxy and directly from the upstream, interleaved,
and records for every chunk its arrival time minus its emit time (one monotonic clock, so no
clock skew). The report gives p50/p99/max of that delay for both paths and the difference:
what the proxy adds to every chunk, not just to the first byte.

    python bench/stream_delay.py                       # toolmend (python -m proxy serve ...)
    python bench/stream_delay.py --preset naive        # the naive pass-through baseline
    python bench/stream_delay.py --preset nginx        # nginx proxy_pass (proxy_buffering off)
    python bench/stream_delay.py --proxy-cmd '{python} -m proxy serve --workers 2 --upstream {upstream} --port {port}'

The proxy runs pinned with taskset to --proxy-cpus (1); this process pins itself to
--load-cpus (0). Stdlib only; the nginx preset needs nginx with the Lua module.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as harness  # noqa: E402  (bench/run.py: process, port and nginx helpers)

STAMP = re.compile(rb"t=(\d+)")
PRESETS = {"toolmend": harness.BUILTIN["toolmend"], "naive": harness.BUILTIN["naive"], "nginx": None}


# ----------------------------------------------------------------------------- upstream


class Upstream:
    def __init__(self, events: int, interval_ms: float):
        self.events = events
        self.interval_ns = int(interval_ms * 1e6)
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    await reader.readexactly(length)
                close = headers.get("connection", "").lower() == "close"
                if method != "POST" or path.split("?")[0] != "/v1/chat/completions":
                    body = b'{"error":{"message":"not found"}}'
                    writer.write(
                        b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    await writer.drain()
                else:
                    await self.stream(writer)
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # client gone, or the server is shutting down
        finally:
            writer.close()

    async def stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        start = time.perf_counter_ns()
        for i in range(self.events):
            delay = (start + i * self.interval_ns - time.perf_counter_ns()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            emit = time.perf_counter_ns()
            event = (
                b'data: {"id":"chatcmpl-delay","object":"chat.completion.chunk","created":1764500000,'
                b'"model":"delay-mock","choices":[{"index":0,"delta":{"content":"t=%d "},'
                b'"logprobs":null,"finish_reason":null}]}\n\n' % emit
            )
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
        done = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
        await writer.drain()


# ----------------------------------------------------------------------------- client


class ChunkedDecoder:
    """Incremental decoder for a Transfer-Encoding: chunked body."""

    def __init__(self) -> None:
        self.buf = b""
        self.state = "size"  # size -> data -> crlf -> size ...
        self.remaining = 0
        self.finished = False

    def feed(self, data: bytes) -> bytes:
        self.buf += data
        out = bytearray()
        while not self.finished:
            if self.state == "size":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    break
                size = int(self.buf[:i].split(b";")[0], 16)
                self.buf = self.buf[i + 2 :]
                if size == 0:
                    self.finished = True
                else:
                    self.remaining, self.state = size, "data"
            elif self.state == "data":
                if not self.buf:
                    break
                take = self.buf[: self.remaining]
                out += take
                self.buf = self.buf[len(take) :]
                self.remaining -= len(take)
                if self.remaining == 0:
                    self.state = "crlf"
            else:
                if len(self.buf) < 2:
                    break
                self.buf, self.state = self.buf[2:], "size"
        return bytes(out)


async def read_stream(port: int, body: bytes, timeout: float) -> list[int]:
    """POST body to 127.0.0.1:port and return, per SSE chunk, arrival_ns - emit_ns."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            b"Content-Type: application/json\r\nAuthorization: Bearer sk-bench\r\n"
            b"Accept: text/event-stream\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
            % (port, len(body), body)
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            raise RuntimeError(f"status {status}")
        chunked = b"transfer-encoding: chunked" in head.lower()
        decoder = ChunkedDecoder() if chunked else None
        text = b""
        delays: list[int] = []
        done = False
        deadline = time.monotonic() + timeout
        while not done:
            data = await asyncio.wait_for(reader.read(65536), max(0.1, deadline - time.monotonic()))
            arrived = time.perf_counter_ns()
            if not data:
                break
            text += decoder.feed(data) if decoder else data
            text = text.replace(b"\r\n", b"\n")
            while b"\n\n" in text:
                event, text = text.split(b"\n\n", 1)
                if b"[DONE]" in event:
                    done = True
                    continue
                m = STAMP.search(event)
                if m:
                    delays.append(arrived - int(m.group(1)))
            if decoder and decoder.finished:
                break
        return delays
    finally:
        writer.close()


async def wait_answers(port: int, proc: harness.Proc, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if not proc.alive():
            return f"exited with code {proc.popen.returncode}"
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1.0)
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Connection: close\r\nContent-Length: 2\r\n\r\n{}"
            )
            await writer.drain()
            await asyncio.wait_for(reader.readuntil(b"\r\n"), 2.0)
            writer.close()
            return None
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        await asyncio.sleep(0.1)
    return f"did not answer within {timeout:.0f} s ({last})"


# ----------------------------------------------------------------------------- main


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def stats_ms(ns: list[int]) -> dict:
    ms = [v / 1e6 for v in ns]
    return {"n": len(ms), "p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99), "max_ms": max(ms), "mean_ms": statistics.fmean(ms)}


async def amain(args: argparse.Namespace) -> int:
    body = harness.REQUEST["stream"].read_bytes()
    upstream = Upstream(args.events, args.interval)
    await upstream.start()
    rundir = Path(tempfile.mkdtemp(prefix="toolmend-delay-"))
    port = harness.free_port()
    if args.preset == "nginx" and not args.proxy_cmd:
        ndir = rundir / "nginx"
        harness.render_nginx(ndir, "proxy", upstream.port, port)
        cmd = harness.nginx_cmd(ndir)
    else:
        cmd = args.proxy_cmd or PRESETS[args.preset]
        for key, value in {
            "port": str(port),
            "upstream": f"http://127.0.0.1:{upstream.port}/v1",
            "mock_port": str(upstream.port),
            "python": sys.executable,
            "repo": str(harness.REPO),
        }.items():
            cmd = cmd.replace("{" + key + "}", value)
    proc = harness.pinned("proxy", cmd, args.proxy_cpus, rundir)
    try:
        reason = await wait_answers(port, proc, harness.START_TIMEOUT)
        if reason:
            print(f"proxy unavailable: {reason}\n  command: {cmd}\n{proc.tail()}", file=sys.stderr)
            return 2
        per_stream_timeout = args.events * args.interval / 1000 + 15
        for _ in range(args.warmup):
            await read_stream(port, body, per_stream_timeout)
        direct: list[int] = []
        proxied: list[int] = []
        for _ in range(args.streams):
            direct += await read_stream(upstream.port, body, per_stream_timeout)
            proxied += await read_stream(port, body, per_stream_timeout)
        want = args.streams * args.events
        if len(direct) != want or len(proxied) != want:
            print(f"warning: expected {want} chunks per path, got direct {len(direct)}, proxy {len(proxied)}", file=sys.stderr)
        if not proxied:
            print("no chunks came through the proxy", file=sys.stderr)
            return 1
        d, p = stats_ms(direct), stats_ms(proxied)
        added = {k: p[k] - d[k] for k in ("p50_ms", "p99_ms", "max_ms", "mean_ms")}
        print(f"per-chunk delay, {args.streams} streams x {args.events} chunks every {args.interval:g} ms")
        print(f"  command: {cmd}")
        print(f"  {'path':<8} {'chunks':>7} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
        for name, s in (("direct", d), ("proxy", p)):
            print(f"  {name:<8} {s['n']:>7} {s['p50_ms']:>9.3f} {s['p99_ms']:>9.3f} {s['max_ms']:>9.3f}")
        print(f"  {'added':<8} {'':>7} {added['p50_ms']:>9.3f} {added['p99_ms']:>9.3f} {added['max_ms']:>9.3f}")
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(
                {"command": cmd, "streams": args.streams, "events": args.events, "interval_ms": args.interval,
                 "direct": d, "proxy": p, "added": added}, indent=2) + "\n")
        return 0
    finally:
        proc.stop()
        await upstream.close()
        shutil.rmtree(rundir, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--proxy-cmd", help="shell command with {port} and {upstream} (default: the --preset's)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="toolmend")
    p.add_argument("--streams", type=int, default=10, help="streams per path (interleaved)")
    p.add_argument("--events", type=int, default=50, help="chunks per stream")
    p.add_argument("--interval", type=float, default=20.0, help="ms between chunks")
    p.add_argument("--warmup", type=int, default=2, help="streams through the proxy before measuring")
    p.add_argument("--load-cpus", default="0", help="CPUs for this process (upstream and client)")
    p.add_argument("--proxy-cpus", default="1", help="CPUs for the proxy (taskset -c)")
    p.add_argument("--out", help="also write the numbers as JSON here")
    args = p.parse_args()
    try:
        os.sched_setaffinity(0, {int(c) for c in args.load_cpus.split(",")})
    except (OSError, ValueError):
        pass
    total = (args.streams * 2 + args.warmup) * args.events * args.interval / 1000
    print(f"about {total:.0f} s of streaming", file=sys.stderr)
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
