"""Prometheus metrics: what the proxy did, repaired and waited for.

Labels are kept to small fixed sets (routes, status codes, rule codes, backends), never paths, tenants or
models. With several workers, prometheus-client's multiprocess mode aggregates what each process wrote:
``toolmend serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before the workers start, and
``/metrics`` then sums across them.
"""

import functools
import os
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

#: Counted by the server's protocol (``proxy/server.py``), which has no app at hand: one counter per process, in the
#: registry of every app the process makes (with ``--workers`` each worker writes its own, as for every metric).
SEND_TIMEOUTS = Counter("toolmend_send_timeouts", "Client connections closed because the client took none of its answer "
                        "for --send-timeout (the upstream request closed with it).", registry=None)


@functools.lru_cache(maxsize=4096)
def labelled(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once per metric and labels: what every request counts (its protocol and
    status, its recall by backend and result) falls under a small set of labels."""
    return metric.labels(*labels)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("toolmend_requests", "Requests answered, by route and status.", ["route", "status"], registry=r)
        self.repairs = Counter("toolmend_repairs", "Repairs made, by rule code and profile.", ["rule", "profile"], registry=r)
        self.calls_reinserted = Counter(
            "toolmend_calls_reinserted", "Tool calls put back into histories, by source (recalled from memory, synthesized "
            "because memory had nothing) and profile.", ["source", "profile"], registry=r)
        self.upstream_seconds = Histogram("toolmend_upstream_seconds", "Upstream time until the whole answer was relayed.",
                                          ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.upstream_first_byte_seconds = Histogram("toolmend_upstream_first_byte_seconds", "Upstream time to the answer's head.",
                                                     ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("toolmend_in_flight_requests", "Requests being handled.", registry=r, multiprocess_mode="livesum")
        self.open_streams = Gauge("toolmend_open_streams", "Event streams being relayed.", registry=r, multiprocess_mode="livesum")
        self.recalls = Counter("toolmend_memory_recalls", "Call ids looked up in memory, by backend and result (hit, miss, error).",
                               ["backend", "result"], registry=r)
        # "livemin": with several workers /metrics shows the lowest worker's value, so one worker that has found
        # the store down is enough (a worker learns of an outage only when it uses the store; a sum, maximum or
        # most recent value would hide it). "live" like the gauges above, whose per-worker files
        # prometheus-client's mark_process_dead removes; toolmend does not call it, so a worker that dies keeps its
        # last value until the proxy restarts with a fresh PROMETHEUS_MULTIPROC_DIR.
        self.memory_up = Gauge("toolmend_memory_up", "1 while the memory store is in use, 0 while it is down (recalls "
                               "skipped, the orphan policy answering), by backend.", ["backend"], registry=r,
                               multiprocess_mode="livemin")
        self.upstream_errors = Counter("toolmend_upstream_errors", "Upstream failures, by kind.", ["kind"], registry=r)
        self.capture_abandoned = Counter(
            "toolmend_capture_abandoned", "Answers relayed without remembering their calls, by why: larger than "
            "--max-capture-bytes (json, stream), or holding more than a remembered turn may, whose excess and junk were "
            "left out of it (bounds).", ["reason"], registry=r)
        r.register(SEND_TIMEOUTS)

    def memory_recalls(self, backend: str, result: str, ids: int) -> None:
        """``GuardedStore``'s count of every recall: how many call ids were hits, misses or errors."""
        labelled(self.recalls, backend, result).inc(ids)

    def memory_health(self, backend: str, up: bool) -> None:
        """``GuardedStore``'s report: at start and on every change of its store's availability."""
        self.memory_up.labels(backend).set(1 if up else 0)

    def capture_gave_up(self, reason: str) -> None:
        self.capture_abandoned.labels(reason).inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition text, summed over every worker in multiprocess mode."""
        if os.environ.get(MULTIPROCESS_ENV):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
