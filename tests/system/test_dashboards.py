"""The shipped Grafana dashboard and Prometheus alerts, tested for real (issue 14 item 5).

A real Prometheus (Debian's package) scrapes a real toolmend (two workers, Redis memory, the strict upstream
and a route to an upstream nobody listens on) every second and evaluates ``deploy/prometheus``'s rules as
often. Traffic makes every series exist (repairs, recalled and synthesized calls, a stream, upstream errors),
then Redis is stopped and the same traffic drives every alert's condition: each query of the dashboard and
each alert expression must return data through Prometheus's HTTP API, and every alert must be pending.
``promtool`` checks the rule file and the example configuration.

Also here: ``toolmend_memory_up``, the gauge behind the memory panel and ToolmendMemoryStoreDown.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from proxy.memory.backoff import Backoff
from proxy.memory.guarded import GuardedStore
from proxy.memory.redis import RedisStore
from proxy.metrics import MULTIPROCESS_ENV, Metrics
from tests.support.processes import HANG_GUARD, REPO, ProxyProcess, RedisServer, eventually, free_port, wait_until
from tests.support.prometheus import PrometheusServer, promtool
from tests.support.strict_upstream import Recorder

DASHBOARD = REPO / "deploy/grafana/toolmend.json"
RULES = REPO / "deploy/prometheus/toolmend-alerts.yml"
EXAMPLE_CONFIG = REPO / "deploy/prometheus/prometheus.yml"
ALERTS = {"ToolmendMemoryStoreDown", "ToolmendUpstreamErrors", "ToolmendSynthesizedCallsRising"}
JOB = "toolmend"
#: What Grafana puts in for the dashboard's variables: "All" jobs, and a rate window. Grafana's own
#: $__rate_interval is at least four scrape intervals; a minute holds every scrape of this test.
VARIABLES = {"job": ".+", "__rate_interval": "1m"}
TOOLS = [{"type": "function", "function": {"name": "weather", "description": "Weather for a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def dashboard_queries() -> list[str]:
    """Every panel query of the dashboard, its variables replaced as Grafana would."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    return [re.sub(r"\$\{?(\w+)\}?", lambda m: VARIABLES[m.group(1)], expr) for expr in exprs]


def test_promtool_accepts_the_rules_and_the_example_configuration() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout
    checked = promtool("check", "config", str(EXAMPLE_CONFIG))  # also checks the rule file it names
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_dashboard_asks_its_data_source_variable_for_everything() -> None:
    model = json.loads(DASHBOARD.read_text())
    variables = {variable["name"]: variable for variable in model["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource" and variables["DS_PROMETHEUS"]["query"] == "prometheus"
    queried = [p for p in model["panels"] if p["type"] != "row"]
    assert queried and all(p["datasource"]["uid"] == "${DS_PROMETHEUS}" for p in queried)
    assert all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for p in queried for t in p["targets"])
    assert len({p["id"] for p in model["panels"]}) == len(model["panels"])


class Traffic:
    """Requests through the proxy that make every series of the dashboard move."""

    def __init__(self, proxy: ProxyProcess, redis: RedisServer) -> None:
        self.proxy, self.redis = proxy, redis
        self.orphans = 0

    def chat(self, messages: list[dict], path: str = "/v1/chat/completions") -> httpx.Response:
        # A new connection each time, so that both workers serve some.
        return httpx.post(self.proxy.url + path, timeout=HANG_GUARD,
                          json={"model": "gpt-strict-test", "messages": messages, "tools": TOOLS})

    def round(self, memory_up: bool) -> None:
        question = [{"role": "user", "content": "Weather in Paris?"}]
        answer = self.chat(question)
        assert answer.status_code == 200, answer.text
        calls = answer.json()["choices"][0]["message"]["tool_calls"]
        if memory_up:  # read your writes: the calls are in Redis before the answer ended, for either worker to recall
            assert self.stored(calls[-1]["id"])
        # The client forgot the calls: recalled from memory while it is up, synthesized while it is down.
        forgetful = question + [{"role": "tool", "tool_call_id": c["id"], "content": "18C"} for c in calls]
        assert self.chat(forgetful).status_code == 200
        # Results whose calls memory never saw: synthesized. More of them than the calls above, so that they are
        # the majority while memory is down even when the worker that answers recalls those from its write buffer.
        orphans = [f"call_neverseen{self.orphans + n:010d}" for n in range(len(calls) + 1)]
        self.orphans += len(orphans)
        orphan = question + [{"role": "tool", "tool_call_id": cid, "content": "18C"} for cid in orphans]
        assert self.chat(orphan).status_code == 200
        streamed = {"model": "gpt-strict-test", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        with httpx.stream("POST", self.proxy.url + "/v1/chat/completions", json=streamed, timeout=HANG_GUARD) as stream:
            assert stream.status_code == 200 and b"[DONE]" in stream.read()
        # Last, so that a scrape that saw it saw the whole round.
        assert self.chat(question, path="/down/v1/chat/completions").status_code == 502

    def stored(self, call_id: str) -> bool:
        return not self.redis.command(b"KEYS", f"toolmend:*:{call_id}".encode()).startswith(b"*0\r\n")


def test_every_dashboard_query_and_alert_returns_data_from_a_real_prometheus(
        strict_upstream: tuple[str, Recorder], tmp_path: Path) -> None:
    routes = tmp_path / "routes.toml"
    routes.write_text(f'[[route]]\nprefix = "/down"\nupstream = "http://127.0.0.1:{free_port()}/v1"\n')  # nobody listens
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = {MULTIPROCESS_ENV: str(metrics_dir), "XDG_STATE_HOME": str(tmp_path)}
    with RedisServer() as redis, \
            ProxyProcess(strict_upstream[0] + "/v1", "--workers", "2", "--memory", redis.url(), "--config", str(routes),
                         env=env) as proxy, \
            PrometheusServer(tmp_path, JOB, [f"127.0.0.1:{proxy.port}"], [RULES]) as prometheus:
        prometheus.wait_for(f'up{{job="{JOB}"}} == 1')
        traffic = Traffic(proxy, redis)
        # Memory up: every series comes to exist, recalled calls among them.
        traffic.round(memory_up=True)
        prometheus.wait_for('toolmend_calls_reinserted_total{source="recalled"} > 0')
        prometheus.wait_for("sum(toolmend_upstream_errors_total) >= 1")
        # Memory down: the same traffic again, now moving every counter since the last scrape, the calls synthesized.
        redis.stop()
        traffic.round(memory_up=False)
        prometheus.wait_for("sum(toolmend_upstream_errors_total) >= 2")

        for expr in dashboard_queries():
            assert prometheus.wait_for(expr), expr
        rules = prometheus.rules()
        assert {rule["name"] for rule in rules} == ALERTS
        for rule in rules:
            assert prometheus.wait_for(rule["query"]), rule["name"]

        def active() -> set[str]:
            return {alert["labels"]["alertname"] for alert in prometheus.alerts() if alert["state"] in ("pending", "firing")}

        wait_until(lambda: active() == ALERTS, HANG_GUARD, "every alert pending")
        # The store-down alert names the backend, from the gauge's label.
        down = prometheus.query("toolmend_memory_up == 0")
        assert [series["metric"]["backend"] for series in down] == ["redis"]


async def test_the_memory_gauge_follows_the_store_down_and_back() -> None:
    metrics = Metrics()

    def memory_up() -> float | None:
        return metrics.registry.get_sample_value("toolmend_memory_up", {"backend": "redis"})

    with RedisServer() as redis:
        store = RedisStore(redis.url(), ttl_seconds=60, max_entries=100)
        guarded = GuardedStore(store, recall_timeout=HANG_GUARD, backoff=Backoff(initial=0.05, maximum=0.2),
                               report=metrics.memory_health)
        try:
            assert memory_up() == 1  # from the start, before any operation
            assert await guarded.recall("t", ["call_1"]) == {}  # used: Redis answers, nothing there
            assert memory_up() == 1
            redis.stop()
            assert await guarded.recall("t", ["call_1"]) == {}
            assert memory_up() == 0
            redis.start()
            await eventually(lambda: guarded.available, "the probe finding Redis back")
            assert memory_up() == 1
        finally:
            await guarded.close()


WORKER = """
import sys
from proxy.metrics import Metrics
Metrics().memory_health("redis", sys.argv[1] == "up")
"""
RENDER = "from proxy.metrics import Metrics; print(Metrics().render()[0].decode())"


@pytest.mark.parametrize("states", [("up", "down"), ("down", "up"), ("up", "up")])
def test_one_worker_that_finds_the_store_down_is_enough_for_the_gauge(tmp_path: Path, states: tuple[str, str]) -> None:
    """With several workers, /metrics shows the lowest worker's value: only a worker that used the store
    learns of an outage, and the others would hide it in a sum, a maximum or a most recent value."""
    env = {**os.environ, MULTIPROCESS_ENV: str(tmp_path)}
    for state in states:  # each its own process, like uvicorn's workers
        subprocess.run([sys.executable, "-c", WORKER, state], env=env, cwd=REPO, check=True, timeout=HANG_GUARD)
    rendered = subprocess.run([sys.executable, "-c", RENDER], env=env, cwd=REPO, check=True, capture_output=True,
                              text=True, timeout=HANG_GUARD).stdout
    lines = [line for line in rendered.splitlines() if line.startswith("toolmend_memory_up{")]
    assert lines == [f'toolmend_memory_up{{backend="redis"}} {0.0 if "down" in states else 1.0}']
