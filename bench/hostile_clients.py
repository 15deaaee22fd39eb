#!/usr/bin/env python3
"""toolmend under hostile clients: a header bomb and slowloris, while an agent loop keeps asking.

    python bench/hostile_clients.py                      # both scenarios against this checkout (~1 min)
    python bench/hostile_clients.py --only slowloris --slow 1500 --seconds 30
    python bench/hostile_clients.py --repo /tmp/old      # the same against another checkout of toolmend

Each scenario starts a fresh `python -m proxy serve` (from `--repo`, `--memory memory://`, plus
`--proxy-args`) in front of a fixed-answer upstream served by this script, then runs, side by side:

- the agent loop: chat-completions requests one after another, each on a new connection with a 10 s
  timeout; counted as ok (200) or failed;
- the attack:
  - bomb: a connection sends a request head that never ends, 1 KiB header lines up to `--bomb-mb` MiB
    (the issue's 300,000 headers of 1 KB) and stops when the proxy answers or cuts it; then the next
    bomb, for `--seconds`;
  - slowloris: `--slow` connections each send an unfinished head and then one more header line every
    `--trickle` seconds; a connection the proxy closes is opened again, as the attack tool would.

The proxy's resident memory (VmRSS) is sampled every 0.2 s: before, peak and after (2 s after the attack),
and under slowloris its open file descriptors too. The proxy gets an open-files limit of `--nofile`
(1024, a stock Linux default) so that holding every connection shows as it would on a real host.
Everything is on 127.0.0.1, every loop is bounded by count and time. Prints a table and writes JSON to
`--out` (default bench/results/hostile.json).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import resource
import select
import shlex
import socket
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from procs import Proc, free_port, wait_http  # bench/ is on sys.path when a script here runs

BENCH = Path(__file__).resolve().parent
REQUEST = (BENCH / "request.json").read_bytes()
ANSWER = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}).encode()
MIB = 1024 * 1024
AGENT_TIMEOUT = 10.0
MAX_AGENT_REQUESTS = 100_000
MAX_BOMBS = 10_000  # the agent loop's bound by count; the scenario's duration bounds it by time


# --- the upstream: a fixed answer to any request, keep-alive ----------------------------------------------

async def _upstream_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%b" % (len(ANSWER), ANSWER))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def start_upstream() -> int:
    """The upstream in a thread of its own (its own event loop); returns its port."""
    started: list[int] = []
    ready = threading.Event()

    def run() -> None:
        async def main() -> None:
            server = await asyncio.start_server(_upstream_connection, "127.0.0.1", 0)
            started.append(server.sockets[0].getsockname()[1])
            ready.set()
            await server.serve_forever()

        asyncio.run(main())

    threading.Thread(target=run, name="upstream", daemon=True).start()
    ready.wait(10)
    return started[0]


# --- measuring the proxy ----------------------------------------------------------------------------------

def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Sampler(threading.Thread):
    """The proxy's peak RSS and open file descriptors, every 0.2 s until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="sampler", daemon=True)
        self.pid, self.stopped = pid, threading.Event()
        self.peak_rss = self.peak_fds = 0.0

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            try:
                self.peak_rss = max(self.peak_rss, rss_mib(self.pid))
                self.peak_fds = max(self.peak_fds, open_fds(self.pid))
            except (OSError, StopIteration):
                return


@dataclass
class AgentLoop:
    """Chat requests one after another, each on a new connection, until stopped (or the count bound)."""

    port: int
    limit: int = MAX_AGENT_REQUESTS
    ok: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agent", daemon=True)

    def start(self) -> AgentLoop:
        self._thread.start()
        return self

    def stop(self, wait: bool = False) -> None:
        """Stop now, or (``wait``) once ``limit`` requests are done."""
        if wait:
            self._thread.join(self.limit * (AGENT_TIMEOUT + 1))
        self._stop.set()
        self._thread.join(AGENT_TIMEOUT + 5)

    def _run(self) -> None:
        for _ in range(self.limit):
            if self._stop.is_set():
                return
            started = time.perf_counter()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=AGENT_TIMEOUT)
                conn.request("POST", "/v1/chat/completions", REQUEST,
                             {"content-type": "application/json", "authorization": "Bearer sk-bench", "connection": "close"})
                response = conn.getresponse()
                response.read()
                conn.close()
                good = response.status == 200
            except (OSError, http.client.HTTPException):
                good = False
            if good:
                self.ok += 1
                self.latencies.append(time.perf_counter() - started)
            else:
                self.failed += 1
                self._stop.wait(0.1)  # an SDK would back off too; keeps a refused loop from spinning

    def summary(self) -> dict:
        total = self.ok + self.failed
        lat = sorted(self.latencies)
        return {"agent_ok": self.ok, "agent_failed": self.failed, "agent_ok_ratio": round(self.ok / total, 4) if total else None,
                "agent_p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
                "agent_max_ms": round(lat[-1] * 1000, 1) if lat else None}


# --- the scenarios ----------------------------------------------------------------------------------------

def header_bomb(port: int, size_mib: int, seconds: float) -> dict:
    """Never-ending heads, one after another for ``seconds``: how much went in before the proxy answered
    or cut each, and what it answered."""
    line = b"x-bomb: " + b"b" * 1014 + b"\r\n"
    batch = line * (MIB // len(line))
    deadline = time.monotonic() + seconds
    bombs, sent_total, answers = 0, 0, set()
    while time.monotonic() < deadline and bombs < MAX_BOMBS:
        bombs += 1
        sent, answer = 0, b""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n")
                for _ in range(size_mib):
                    if select.select([sock], [], [], 0)[0] or time.monotonic() > deadline:
                        break
                    sock.sendall(batch)
                    sent += len(batch)
                answer = sock.recv(200)
        except OSError:
            pass
        sent_total += sent
        answers.add(answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/1.1 ") else "none")
    return {"bombs": bombs, "bomb_sent_mib": round(sent_total / MIB, 1), "bomb_mean_mib": round(sent_total / MIB / bombs, 2),
            "bomb_answers": sorted(answers)}


async def slowloris(port: int, count: int, seconds: float, trickle: float) -> dict:
    """``count`` connections holding unfinished heads for ``seconds``; closed ones are opened again."""
    stats = {"slow_opened": 0, "slow_closed_by_proxy": 0, "slow_connect_failed": 0}
    deadline = asyncio.get_running_loop().time() + seconds

    async def one(index: int) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() < deadline:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
            except (OSError, TimeoutError):
                stats["slow_connect_failed"] += 1
                await asyncio.sleep(trickle)
                continue
            stats["slow_opened"] += 1
            try:
                writer.write(b"GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\n")
                while loop.time() < deadline:
                    try:
                        if await asyncio.wait_for(reader.read(1024), trickle) == b"":
                            stats["slow_closed_by_proxy"] += 1
                            break
                    except TimeoutError:
                        writer.write(b"x-slow-%d: 1\r\n" % index)
            except OSError:
                stats["slow_closed_by_proxy"] += 1
            finally:
                writer.close()

    await asyncio.gather(*(one(i) for i in range(count)))
    return stats


# --- running ----------------------------------------------------------------------------------------------

def start_proxy(args: argparse.Namespace, upstream_port: int, rundir: Path) -> tuple[Proc, int]:
    port = free_port()
    argv = [sys.executable, "-m", "proxy", "serve", "--upstream", f"http://127.0.0.1:{upstream_port}/v1", "--host", "127.0.0.1",
            "--port", str(port), "--memory", "memory://", "--log-level", "warning", *shlex.split(args.proxy_args)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLMEND_")}
    proxy = Proc("proxy", argv, rundir, Path(args.repo), env)
    if (reason := wait_http(port, "/healthz", proxy)) is not None:
        proxy.stop()
        raise SystemExit(f"the proxy did not start: {reason}")
    resource.prlimit(proxy.pid, resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
    return proxy, port


def run_scenario(name: str, args: argparse.Namespace, upstream_port: int, rundir: Path) -> dict:
    proxy, port = start_proxy(args, upstream_port, rundir)
    try:
        warm = AgentLoop(port, limit=20).start()  # the first requests import and allocate what every later one uses
        warm.stop(wait=True)
        before = rss_mib(proxy.pid)
        sampler, agent = Sampler(proxy.pid), AgentLoop(port)
        sampler.start()
        agent.start()
        if name == "bomb":
            result = header_bomb(port, args.bomb_mb, args.seconds)
        else:
            result = asyncio.run(slowloris(port, args.slow, args.seconds, args.trickle))
        agent.stop()
        time.sleep(2)
        sampler.stopped.set()
        sampler.join()
        alive = proxy.alive()
        result |= {"rss_before_mib": round(before, 1), "rss_peak_mib": round(sampler.peak_rss, 1),
                   "rss_after_mib": round(rss_mib(proxy.pid), 1) if alive else None, "proxy_peak_fds": int(sampler.peak_fds),
                   "proxy_alive": alive, **agent.summary()}
        return result
    finally:
        proxy.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("bomb", "slowloris"))
    parser.add_argument("--repo", default=str(BENCH.parent), help="the toolmend checkout to run (default: this one)")
    parser.add_argument("--proxy-args", default="", help="extra flags for `proxy serve`, e.g. '--max-connections 500'")
    parser.add_argument("--bomb-mb", type=int, default=300, help="MiB of header lines the bomb sends at most")
    parser.add_argument("--slow", type=int, default=1500, help="slowloris connections")
    parser.add_argument("--seconds", type=float, default=30, help="how long each attack lasts at most")
    parser.add_argument("--trickle", type=float, default=5, help="seconds between the header lines of a slow connection")
    parser.add_argument("--nofile", type=int, default=1024, help="the proxy's open-files limit")
    parser.add_argument("--out", default=str(BENCH / "results" / "hostile.json"))
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.slow + 256)), hard))  # this side's sockets

    upstream_port = start_upstream()
    results = {}
    with tempfile.TemporaryDirectory(prefix="toolmend-hostile-") as rundir:
        for name in ("bomb", "slowloris"):
            if args.only in (None, name):
                results[name] = run_scenario(name, args, upstream_port, Path(rundir))
                print(name, json.dumps(results[name]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"repo": args.repo, "args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
