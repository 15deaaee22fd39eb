"""Process and port helpers shared by the benchmark scripts: free loopback ports, children in their own
session, and the CPU time and resident memory of a process with its children, read from /proc."""

import http.client
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may contain spaces)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def proc_tree(root: int) -> list[int]:
    """root and all its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def tree_cpu_seconds(root: int) -> float:
    """utime+stime (+ reaped children's) of root and its descendants, in seconds."""
    ticks = sum(sum(int(x) for x in fields[11:15]) for pid in proc_tree(root) if (fields := _stat_fields(pid)) is not None)
    return ticks / CLK_TCK


def tree_rss_kb(root: int) -> int:
    """Resident memory of root and its descendants, in KiB."""
    total = 0
    for pid in proc_tree(root):
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        except OSError:
            continue
    return total


class Proc:
    """A child in its own session (so Ctrl-C and stop() reach it and its children only), logging to a file."""

    def __init__(self, name: str, argv: list[str], rundir: Path, cwd: Path, env: dict[str, str] | None = None,
                 grace_seconds: float = 8) -> None:
        self.name = name
        self.grace_seconds = grace_seconds
        self.log_path = rundir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, n: int = 12) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL after the grace period; whatever a dead leader left is killed too."""
        if self.popen.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=self.grace_seconds)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.popen.wait(timeout=5)
        else:
            self._signal_group(signal.SIGKILL)
        self._log.close()

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def wait_http(port: int, path: str, proc: Proc, timeout: float = 20.0) -> str | None:
    """Poll GET path until it answers 200. None when up, else why not."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if not proc.alive():
            return f"{proc.name} exited with code {proc.popen.returncode}:\n{proc.tail()}"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            if resp.status == 200:
                return None
            last = f"HTTP {resp.status}"
        except (OSError, http.client.HTTPException) as exc:
            last = f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()
        time.sleep(0.1)
    return f"{proc.name} did not answer GET {path} within {timeout:.0f} s ({last}):\n{proc.tail()}"
