"""A real forward proxy for the egress tests: Debian's ``tinyproxy`` on a free loopback port, started with a
generated configuration (never the system service's port 8888) and stopped by its process id.

``requests()`` reads what it was asked to do from its own log (``CONNECT host:port`` for a tunnel,
``GET http://...`` for a plain request), so a test can see whether traffic went through it at all.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from pathlib import Path

from tests.support.ci import unavailable
from tests.support.processes import free_port, stop_process, wait_until

REQUEST_LINE = re.compile(r"Request \(file descriptor \d+\): (.+)$")


class Tinyproxy:
    def __init__(self, folder: Path, connect_ports: tuple[int, ...], user: str | None = None, password: str | None = None) -> None:
        if shutil.which("tinyproxy") is None:
            unavailable("tinyproxy is not installed (bash .ci/run installs it: apt-get install tinyproxy)")
        self.port = free_port()
        self.folder = folder
        self.log_path = folder / f"tinyproxy-{self.port}.log"
        lines = [f"Port {self.port}", "Listen 127.0.0.1", "Timeout 30", f'LogFile "{self.log_path}"', "LogLevel Connect",
                 "MaxClients 50", "Allow 127.0.0.1", "DisableViaHeader Yes",
                 *(f"ConnectPort {port}" for port in connect_ports)]
        if user is not None:
            lines.append(f"BasicAuth {user} {password}")
        self.config = folder / f"tinyproxy-{self.port}.conf"
        self.config.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen | None = None

    def url(self, user: str | None = None, password: str | None = None) -> str:
        credentials = f"{user}:{password}@" if user is not None else ""
        return f"http://{credentials}127.0.0.1:{self.port}"

    def __enter__(self) -> Tinyproxy:
        self.proc = subprocess.Popen(["tinyproxy", "-d", "-c", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(self._accepts, 10, f"tinyproxy on port {self.port}")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _accepts(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"tinyproxy exited with {self.proc.returncode}: {self.log()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def requests(self) -> list[str]:
        """The request lines tinyproxy received, in order (``CONNECT 127.0.0.1:4430 HTTP/1.1``...)."""
        return [m.group(1) for line in self.log().splitlines() if (m := REQUEST_LINE.search(line))]

    def __exit__(self, *exc: object) -> None:
        stop_process(self.proc)
        self.proc = None
