"""Real processes for the shared-memory tests: a throwaway redis-server, and ``python -m proxy serve``.

Everything binds to loopback on a free port, every wait is bounded, and stopping is by process id.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support.ci import unavailable
from tests.support.client_tls import TLS

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen | None, grace: float = 5.0) -> int | None:
    """SIGTERM (a graceful stop), then SIGKILL after ``grace`` seconds; the exit code, None for no process."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


def wait_answering(proc: subprocess.Popen, url: str, what: str, log: Callable[[], str], timeout: float) -> None:
    """Until GET ``url`` answers 200; fails at once, with ``log()``, if ``proc`` exits meanwhile."""

    def answering() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log()}")
        try:
            return httpx.get(url, timeout=1, verify=TLS).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(answering, timeout, what, interval=0.05)


def wait_until(condition, timeout: float, what: str, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(interval)


class RedisServer:
    """``redis-server`` on a free loopback port, no persistence; ``stop`` and ``start`` keep the port."""

    def __init__(self, port: int | None = None) -> None:
        if shutil.which("redis-server") is None:
            unavailable("redis-server is not installed (bash .ci/run installs it)")
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def options(self) -> list[str]:
        return ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--loglevel", "warning"]

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(["redis-server", *self.options()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.answers, 5, f"redis-server on port {self.port}")
        return self

    def answers(self) -> bool:
        try:
            return self.command(b"PING").startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *parts: bytes) -> bytes:
        """One command in RESP, the raw reply (enough for PING, FLUSHALL, INFO)."""
        payload = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(payload)
            reply = s.recv(1 << 20)
            if reply.startswith(b"$"):
                size = int(reply[1:reply.index(b"\r\n")])
                while len(reply) < size + len(str(size)) + 5:
                    reply += s.recv(1 << 20)
            return reply

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ProxyProcess:
    """``python -m proxy serve`` as its own OS process; its log goes to a file read by ``log()``."""

    def __init__(self, upstream: str, *args: str, env: dict[str, str] | None = None, port: int | None = None,
                 preexec_fn=None) -> None:
        self.upstream = upstream
        self.preexec_fn = preexec_fn  # runs in the child before it starts (e.g. to set resource limits)
        self.args = args
        self.port = port or free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLMEND_")}
        self.env.update(env or {})
        self._log = tempfile.NamedTemporaryFile(prefix="toolmend-proxy-", suffix=".log", delete=False)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20) -> ProxyProcess:
        self.launch()
        try:
            return self.wait_ready(timeout)
        except BaseException:
            self.stop()  # __exit__ never runs when __enter__ fails: never leave a proxy behind
            raise

    def launch(self) -> ProxyProcess:
        """Start the process without waiting for it (start several, then ``wait_ready`` each)."""
        command = [sys.executable, "-m", "proxy", "serve", "--upstream", self.upstream, "--host", "127.0.0.1",
                   "--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(command, cwd=REPO, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
                                     preexec_fn=self.preexec_fn)
        return self

    def wait_ready(self, timeout: float = 20) -> ProxyProcess:
        wait_answering(self.proc, self.url + "/readyz", f"proxy on port {self.port}", self.log, timeout)
        return self

    def stop(self) -> int | None:
        """SIGTERM (uvicorn's graceful shutdown: the store flushes), then SIGKILL after 15 s."""
        code, self.proc = stop_process(self.proc, grace=15), None
        return code

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def __enter__(self) -> ProxyProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._log.close()
        os.unlink(self._log.name)


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def process_of_local_port(port: int, pids: list[int]) -> int | None:
    """Which of ``pids`` holds the TCP socket whose local port is ``port`` (from /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return pid
            except OSError:
                continue
    return None


#: Seconds a test waits for something that should happen at once before it calls it hung. Generous, so
#: that a loaded machine never fails a test by chance: only a broken behaviour ever waits it out.
HANG_GUARD = 30.0


async def eventually(condition: Callable[[], object], what: str, timeout: float = HANG_GUARD) -> object:
    """``wait_until`` for async tests: polls without blocking the event loop the awaited work runs in."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (result := condition()):
        if loop.time() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.01)
    return result


class RedisClusterNode(RedisServer):
    """A ``redis-server`` in cluster mode whose cluster config (node id, slots, peers) is a file in ``directory``:
    killed and started again on its port, it rejoins the cluster with its slots (and without its data)."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self.bus_port = free_port()  # by default the port + 10000, which may be taken or above 65535

    def options(self) -> list[str]:
        return [*super().options(), "--cluster-enabled", "yes", "--cluster-port", str(self.bus_port),
                "--dir", self.directory, "--cluster-config-file", f"nodes-{self.port}.conf"]

    def kill(self) -> None:
        """SIGKILL: the node is gone at once, as when its machine fails."""
        self.proc.kill()
        self.proc.wait(5)
        self.proc = None

    def slots(self) -> list[range]:
        """The hash slots this node serves, from its own line of ``CLUSTER NODES``."""
        mine = next(line for line in self.command(b"CLUSTER", b"NODES").decode().splitlines() if "myself" in line)
        ranges = (field.partition("-") for field in mine.split()[8:] if not field.startswith("["))  # "[...]": migrating
        return [range(int(first), int(last or first) + 1) for first, _, last in ranges]


class RedisCluster:
    """A Redis Cluster of ``masters`` masters and no replicas on free loopback ports, made by ``redis-cli --cluster
    create``; no persistence."""

    def __init__(self, masters: int = 3) -> None:
        if shutil.which("redis-cli") is None:
            unavailable("redis-cli is not installed (it comes with redis-server)")
        self.directory = tempfile.mkdtemp(prefix="toolmend-redis-cluster-")
        self.nodes = [RedisClusterNode(self.directory) for _ in range(masters)]

    def url(self, scheme: str = "redis+cluster") -> str:
        return f"{scheme}://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def start(self) -> RedisCluster:
        for node in self.nodes:
            node.start()
        subprocess.run(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{node.port}" for node in self.nodes),
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=30)
        self.wait_ok()
        return self

    def wait_ok(self) -> None:
        def ok(node: RedisClusterNode) -> bool:
            return node.answers() and b"cluster_state:ok" in node.command(b"CLUSTER", b"INFO")

        wait_until(lambda: all(ok(node) for node in self.nodes), 30, "every cluster node answering cluster_state:ok")

    def node_of(self, key: str) -> RedisClusterNode:
        """The master serving ``key``."""
        slot = int(self.nodes[0].command(b"CLUSTER", b"KEYSLOT", key.encode())[1:-2])
        return next(node for node in self.nodes if any(slot in served for served in node.slots()))

    def command(self, *parts: bytes) -> list[bytes]:
        """One command sent to every node, their replies."""
        return [node.command(*parts) for node in self.nodes]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RedisCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()  # __exit__ never runs when __enter__ fails: never leave servers behind
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
