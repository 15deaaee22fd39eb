#!/usr/bin/env python3
"""What each memory backend costs: toolmend with memory://, the SQLite file, Redis and a Redis Cluster, in one run.

    python bench/memory_backends.py                       # JSON and streams, 10 s at 32 connections, 5 s at 1
    python bench/memory_backends.py --duration 3 --rounds 2
    python bench/memory_backends.py --only stream         # any other bench/run.py option passes through

Starts a throwaway redis-server and a three-master Redis Cluster (no persistence, on the load CPUs like
the mock upstream, as separate Redis machines would be) and a temporary SQLite file, runs bench/run.py with one target per backend,
and prints each backend's throughput at 32 connections and median latency at 1 connection against
memory://'s. Every answer of the mock carries a tool call, so every request remembers one turn, and with a
shared store the end of every answer waits until its turn is written (read your writes: the JSON body, a
stream's [DONE]): that wait, and the writes, are what this measures. Exit status 1 when a shared backend
keeps less than ``TARGET`` of memory://'s throughput in some scenario of this run.

Stdlib only; needs what bench/run.py needs, plus redis-server and redis-cli (apt-get install -y redis-server).
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from procs import free_port  # bench/ is on sys.path when a script here runs

BENCH = Path(__file__).resolve().parent
SERVE = "{python} -m proxy serve --upstream {upstream} --host 127.0.0.1 --port {port} --log-level warning --memory "
BACKENDS = ("memory", "sqlite", "redis", "cluster")
CLUSTER_MASTERS = 3
#: The least share of memory://'s throughput (32 connections, same run) a shared backend must keep.
TARGET = 0.85

def start_redis(port: int, cpus: str, *options: str) -> subprocess.Popen:
    if shutil.which("redis-server") is None:
        sys.exit("missing: redis-server (apt-get install -y redis-server)")
    proc = subprocess.Popen(["taskset", "-c", cpus, "redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", *options], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start")


def start_cluster(cpus: str, workdir: Path) -> tuple[list[subprocess.Popen], str]:
    """``CLUSTER_MASTERS`` redis-servers made one cluster by ``redis-cli --cluster create``; its URL."""
    ports = [free_port() for _ in range(CLUSTER_MASTERS)]
    procs = [start_redis(port, cpus, "--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                         "--dir", str(workdir), "--cluster-config-file", f"nodes-{port}.conf") for port in ports]
    addresses = [f"127.0.0.1:{port}" for port in ports]
    subprocess.run(["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
                   check=True, stdout=subprocess.DEVNULL, timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = [subprocess.run(["redis-cli", "-p", str(port), "cluster", "info"], capture_output=True, text=True).stdout
                  for port in ports]
        if all("cluster_state:ok" in state for state in states):
            return procs, "redis+cluster://" + ",".join(addresses)
        time.sleep(0.1)
    for proc in procs:
        proc.kill()
    sys.exit("the Redis Cluster did not reach cluster_state:ok")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load-cpus", default="0")
    args, passthrough = parser.parse_known_args()
    workdir = Path(tempfile.mkdtemp(prefix="toolmend-memory-bench-"))
    out = workdir / "results.json"
    redis_port = free_port()
    redis = start_redis(redis_port, args.load_cpus)
    cluster, cluster_url = start_cluster(args.load_cpus, workdir)
    urls = {"memory": "memory://", "sqlite": f"sqlite://{workdir}/memory.db", "redis": f"redis://127.0.0.1:{redis_port}/0",
            "cluster": cluster_url}
    command = [sys.executable, str(BENCH / "run.py"), "--targets", ",".join(BACKENDS), "--out", str(out),
               "--load-cpus", args.load_cpus, *passthrough]
    for name in BACKENDS:
        command += ["--target", f"{name}={SERVE}{urls[name]}"]
    try:
        code = subprocess.call(command)
    finally:
        for server in (redis, *cluster):
            server.terminate()
            server.wait(5)
    if code != 0 or not out.exists():
        return code or 1
    kept = report(json.loads(out.read_text()))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if kept else 1


def report(doc: dict) -> bool:
    """Print each backend against memory:// of the same run; whether every shared one kept ``TARGET``."""
    print("\n== Memory backends against memory:// (same run) ==")
    print(f"{'scenario':<8} {'backend':<8} {'req/s @32':>10} {'vs memory':>10} {'p50 ms @1':>10} {'added ms':>9} {'cpu us/req @32':>15}")
    kept = True
    for scenario, targets in doc["summary"].items():
        base = targets.get("memory", {})
        for name in BACKENDS:
            row = targets.get(name)
            if not row:
                print(f"{scenario:<8} {name:<8} unavailable")
                kept = False
                continue
            rps, p50 = row["c32"]["rps"], row["c1"]["p50_ms"]
            ratio = rps / base["c32"]["rps"] if base else float("nan")
            added = p50 - base["c1"]["p50_ms"] if base else float("nan")
            cpu = row["c32"]["cpu_us_per_req"]
            verdict = "" if name == "memory" else "  ok" if ratio >= TARGET else "  BELOW TARGET"
            kept = kept and (name == "memory" or ratio >= TARGET)
            print(f"{scenario:<8} {name:<8} {rps:>10,.0f} {ratio:>9.1%} {p50:>10.3f} {added:>+9.3f} "
                  f"{cpu if cpu is not None else float('nan'):>15.0f}{verdict}")
    print(f"target: each shared backend keeps >= {TARGET:.0%} of memory://'s throughput at 32 connections")
    return kept


if __name__ == "__main__":
    sys.exit(main())
