"""A real Prometheus server (Debian's ``prometheus`` package) and its ``promtool``, for the dashboard and alert tests.

The server listens on a free loopback port (never 9090, which a system Prometheus may hold), keeps its data in
a throwaway directory and reads a configuration written here; the tests ask it things through its HTTP API.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import httpx

from tests.support.ci import unavailable
from tests.support.client_tls import TLS
from tests.support.processes import HANG_GUARD, free_port, stop_process, wait_answering, wait_until

SKIP_REASON = "prometheus/promtool are not installed (bash .ci/run installs Debian's prometheus package)"


def require_prometheus() -> None:
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        unavailable(SKIP_REASON)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    require_prometheus()
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=HANG_GUARD)


class PromQLError(AssertionError):
    """Prometheus refused a query (bad syntax, unknown function): a broken expression, not data still to come."""


class PrometheusServer:
    """``prometheus`` scraping ``targets`` as job ``job`` every ``interval`` and evaluating ``rule_files`` as often."""

    def __init__(self, directory: Path, job: str, targets: list[str], rule_files: list[Path], interval: str = "1s") -> None:
        require_prometheus()
        self.directory = directory
        self.port = free_port()
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(path) for path in rule_files],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}]}],
        }
        self.config = directory / "prometheus.yml"
        self.config.write_text(json.dumps(config))  # JSON is YAML
        self._log = tempfile.NamedTemporaryFile(prefix="toolmend-prometheus-", suffix=".log", dir=directory, delete=False)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PrometheusServer:
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.config}", f"--storage.tsdb.path={self.directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self._log, stderr=subprocess.STDOUT)
        wait_answering(self.proc, self.url + "/-/ready", f"prometheus on port {self.port}", self.log, HANG_GUARD)
        return self

    def api(self, path: str, **params: str) -> object:
        answer = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10, verify=TLS)
        body = answer.json()
        if body.get("status") != "success":
            raise PromQLError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """The instant vector (or scalar) ``expr`` gives now; empty while it has no data."""
        data = self.api("query", query=expr)
        return data["result"] if data["resultType"] in ("vector", "matrix") else [data["result"]]

    def wait_for(self, expr: str, timeout: float = HANG_GUARD) -> list[dict]:
        """Poll ``expr`` until it returns data: the scrapes and rule evaluations it needs are a second apart."""
        return wait_until(lambda: self.query(expr), timeout, f"PromQL {expr!r} returning data", interval=0.2)

    def alerts(self) -> list[dict]:
        return self.api("alerts")["alerts"]

    def rules(self) -> list[dict]:
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.proc, grace=15)
        self.proc = None
        self._log.close()

    def __enter__(self) -> PrometheusServer:
        try:
            return self.start()
        except BaseException:
            self.stop()  # __exit__ never runs when __enter__ fails: never leave a server behind
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
