#!/usr/bin/env python3
"""toolmend soak: a bounded, fixed-rate, mixed load against a real toolmend and a strict upstream.

    python bench/soak.py                          # 600 s at 100 req/s
    python bench/soak.py --duration 60            # a quick check
    python bench/soak.py --debug-memory           # also tracemalloc snapshots of toolmend (slower)

What it does: starts the strict scripted upstream of tests/support/strict_upstream.py under uvicorn in
its own process (it emits real tool calls and answers HTTP 400 to any history a strict provider would
reject), starts `python -m proxy serve` in front of it with an in-process memory small enough that its
LRU bound is reached (`--memory-max-entries`, default 5,000) and `--orphan-policy reject`, so a tool
result whose call toolmend cannot recall is an error instead of a silently synthesized call. Then an
open-loop load (asyncio + httpx; requests are scheduled by the clock, not by completions) at `--rate`
requests/s for `--duration` seconds, mixed:

- json:   a valid 3 KB history (bench/request.json) ending with a new user message; the upstream answers
          with 1-3 parallel tool calls, which toolmend remembers;
- stream: the same with "stream": true (half of them with stream_options.include_usage);
- repair: an earlier json/stream conversation answered: its history plus the tool results, with the
          assistant tool_calls message dropped, so toolmend must re-insert the calls from its memory
          (half of them streamed). The answer must carry x-toolmend-repairs with TM101.

Every request uses one of `--tenants` API keys and a fresh conversation id, so the memory fills up and
evicts. toolmend's resident memory (VmRSS of the proxy and its children) is sampled every 5 s. Exit
status: 0 when no request failed and RSS grew < 10 % after warm-up, 1 otherwise, 2 when the setup
failed, 130 when interrupted. Results go to bench/results/soak.json.

Internal modes (used by the soak itself): `soak.py _upstream PORT` serves the strict upstream;
`soak.py _proxy serve ...` runs toolmend's CLI with the memory debug hooks (see --debug-memory).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime as _dt
import gc
import json
import math
import os
import platform
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from procs import Proc, free_port, tree_cpu_seconds, tree_rss_kb, wait_http  # bench/ is on sys.path when a script here runs

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results" / "soak.json"
REQUEST = BENCH / "request.json"
KINDS = ("json", "stream", "repair")
REPAIRS_HEADER = "x-toolmend-repairs"
DEBUG_ENV = "TOOLMEND_SOAK_TRACEMALLOC"  # frames to trace; set only in the proxy the soak starts
DEBUG_DIR_ENV = "TOOLMEND_SOAK_DEBUG_DIR"
SAMPLE_EVERY = 5.0
START_TIMEOUT = 20.0
MIN_ANSWER_AGE = 1.0  # seconds between a tool-call answer and the request that answers the calls


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- processes



# ----------------------------------------------------------------------------- internal modes


def serve_upstream(port: int) -> None:
    """The strict scripted upstream under uvicorn (uvloop and httptools when installed), access log off."""
    sys.path.insert(0, str(REPO))
    import uvicorn

    from tests.support.strict_upstream import make_strict_upstream

    app, recorder = make_strict_upstream()
    # The soak never reads the recorder; keeping every request would grow this process without bound.
    recorder._add = lambda attr, item: None  # type: ignore[method-assign]
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, server_header=False)


def run_proxy_with_hooks(argv: list[str]) -> int:
    """toolmend's CLI, plus (only in this process) a SIGUSR1 handler that writes a memory snapshot.

    With TOOLMEND_SOAK_TRACEMALLOC=N, tracemalloc traces N frames from start-up; each SIGUSR1 writes
    snap-K.tracemalloc (when tracing) and snap-K.json (traced memory, gc object census by type, the sizes
    of every InProcessStore) into TOOLMEND_SOAK_DEBUG_DIR. Nothing under proxy/ is changed.
    """
    import tracemalloc

    frames = int(os.environ.get(DEBUG_ENV) or 0)
    outdir = Path(os.environ.get(DEBUG_DIR_ENV) or ".")
    if frames > 0:
        tracemalloc.start(frames)
    count = [0]

    def dump(signum, frame) -> None:
        count[0] += 1
        k = count[0]
        gc.collect()
        objects = gc.get_objects()
        census = collections.Counter(type(o).__name__ for o in objects)
        stores = []
        for o in objects:
            name = type(o).__name__
            if name == "InProcessStore":
                stores.append({"type": name, "turns": len(o._turns), "index": len(o._index), "max_entries": o.max_entries})
            elif name == "GuardedStore":
                stores.append({"type": name, "failures": o.failures, "skipped": o.skipped, "available": o.available})
        info = {
            "k": k,
            "time": time.time(),
            "gc_objects": len(objects),
            "types": census.most_common(25),
            "stores": stores,
            "traced": tracemalloc.get_traced_memory() if tracemalloc.is_tracing() else None,
        }
        del objects
        if tracemalloc.is_tracing():
            snap = tracemalloc.take_snapshot()
            tmp = outdir / f"snap-{k}.tracemalloc.tmp"
            snap.dump(str(tmp))
            os.replace(tmp, outdir / f"snap-{k}.tracemalloc")
        tmp = outdir / f"snap-{k}.json.tmp"
        tmp.write_text(json.dumps(info))
        os.replace(tmp, outdir / f"snap-{k}.json")

    signal.signal(signal.SIGUSR1, dump)
    sys.path.insert(0, str(REPO))
    from proxy.cli import main as toolmend_main

    return toolmend_main(argv)


# ----------------------------------------------------------------------------- load


@dataclass
class Pending:
    """A conversation whose last answer made tool calls, waiting for its tool results to be sent."""

    tenant: str
    conv: str
    messages: list
    calls: list  # [(id, name)]
    at: float


@dataclass
class KindStats:
    sent: int = 0
    ok: int = 0
    errors: int = 0
    latencies: list = field(default_factory=list)  # seconds from the scheduled time to the whole answer


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]


class SoakError(Exception):
    pass


def parse_sse(data: bytes) -> tuple[bool, list, str]:
    """(saw [DONE], [(id, name)] of the assembled tool calls, assembled text) of an SSE body."""
    import orjson

    done, calls, text = False, {}, []
    for event in data.replace(b"\r\n", b"\n").split(b"\n\n"):
        for line in event.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                continue
            chunk = orjson.loads(payload)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                if isinstance(delta.get("content"), str):
                    text.append(delta["content"])
                for tc in delta.get("tool_calls") or ():
                    slot = calls.setdefault(tc.get("index", 0), [None, None])
                    if tc.get("id"):
                        slot[0] = tc["id"]
                    name = (tc.get("function") or {}).get("name")
                    if name:
                        slot[1] = name
    return done, [tuple(calls[i]) for i in sorted(calls)], "".join(text)


class Load:
    def __init__(self, args: argparse.Namespace, url: str, proxy: Proc, debug_dir: Path | None):
        import orjson

        self.dumps = orjson.dumps
        self.loads = orjson.loads
        self.args = args
        self.url = url
        self.proxy = proxy
        self.debug_dir = debug_dir
        self.rng = random.Random(args.seed)
        base = json.loads(REQUEST.read_text())
        self.model = base["model"]
        self.tools = base["tools"]
        self.history = base["messages"][:-1]
        self.question = base["messages"][-1]["content"]
        run_tag = f"{os.getpid():x}{int(time.time()) & 0xFFFF:x}"
        self.tenants = [f"sk-soak-{run_tag}-{i:05d}" for i in range(args.tenants)]
        weights = [int(x) for x in args.mix.split(",")]
        self.weights = weights
        self.stats = {k: KindStats() for k in KINDS}
        self.errors: list[dict] = []
        self.pending: collections.deque[Pending] = collections.deque(maxlen=args.pending)
        self.conv_counter = 0
        self.turns_emitted = 0
        self.abandoned = 0
        self.repair_fallbacks = 0
        self.lags: list[float] = []
        self.missed = 0
        self.samples: list[tuple[float, int]] = []
        self.snapshots: list[dict] = []
        self.stop = asyncio.Event()
        self.interrupted = False
        self.proxy_died = False
        self.tasks: set[asyncio.Task] = set()

    # -- request bodies

    def new_conversation(self, stream: bool) -> tuple[str, str, list, bytes]:
        self.conv_counter += 1
        conv = f"c{self.conv_counter:07d}"
        tenant = self.rng.choice(self.tenants)
        messages = self.history + [{"role": "user", "content": f"{self.question} [conversation {conv}]"}]
        body = {"model": self.model, "messages": messages, "tools": self.tools, "user": conv}
        if stream:
            body["stream"] = True
            if self.rng.random() < 0.5:
                body["stream_options"] = {"include_usage": True}
        return tenant, conv, messages, self.dumps(body)

    def answer_body(self, p: Pending, stream: bool) -> bytes:
        results = [
            {"role": "tool", "tool_call_id": cid, "content": self.dumps({"conversation": p.conv, "tool": name, "ok": True}).decode()}
            for cid, name in p.calls
        ]
        # The client dropped the assistant tool_calls message: the results are orphans toolmend must repair.
        body = {"model": self.model, "messages": p.messages + results, "tools": self.tools, "user": p.conv}
        if stream:
            body["stream"] = True
        return self.dumps(body)

    # -- one request

    def fail(self, kind: str, what: str) -> None:
        self.stats[kind].errors += 1
        if len(self.errors) < self.args.show_errors * 4:
            self.errors.append({"t": round(time.monotonic() - self.t0, 3), "kind": kind, "error": what[:400]})

    async def post(self, client, body: bytes, headers: dict, stream: bool):
        """(status, headers, body bytes), bounded by --timeout as a whole (streams included)."""
        async with asyncio.timeout(self.args.timeout):
            if not stream:
                r = await client.post(self.url, content=body, headers=headers)
                return r.status_code, r.headers, r.content
            async with client.stream("POST", self.url, content=body, headers=headers) as r:
                data = b"".join([chunk async for chunk in r.aiter_raw()])
                return r.status_code, r.headers, data

    async def one(self, client, kind: str, p: Pending | None, due: float) -> None:
        st = self.stats[kind]
        st.sent += 1
        stream = self.rng.random() < 0.5 if kind == "repair" else kind == "stream"
        if p is not None:
            tenant, body = p.tenant, self.answer_body(p, stream)
        else:
            tenant, conv, messages, body = self.new_conversation(stream)
        headers = {"authorization": f"Bearer {tenant}", "content-type": "application/json"}
        if kind != "repair":
            headers["x-test-parallel-calls"] = str(self.rng.randint(1, 3))
        try:
            status, rh, data = await self.post(client, body, headers, stream)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            self.fail(kind, f"timeout after {self.args.timeout} s")
            return
        except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
            self.fail(kind, f"{type(exc).__name__}: {exc}")
            return
        latency = time.monotonic() - due
        if not 200 <= status < 300:
            self.fail(kind, f"HTTP {status}: {data[:300].decode(errors='replace')}")
            return
        try:
            if stream:
                done, calls, text = parse_sse(data)
                if not done:
                    raise SoakError("stream ended without data: [DONE]")
            else:
                message = self.loads(data)["choices"][0]["message"]
                calls = [(c["id"], c["function"]["name"]) for c in message.get("tool_calls") or ()]
                text = message.get("content") or ""
            repairs = rh.get(REPAIRS_HEADER)
            if kind == "repair":
                if not repairs or "TM101" not in repairs:
                    raise SoakError(f"orphan results not repaired ({REPAIRS_HEADER}: {repairs!r})")
                want = f"Received {len(p.calls)} tool result{'' if len(p.calls) == 1 else 's'}."
                if text != want or calls:
                    raise SoakError(f"unexpected answer to the tool results: {text!r} calls={calls!r}")
            else:
                if repairs:
                    raise SoakError(f"a valid history was repaired ({REPAIRS_HEADER}: {repairs})")
                if not calls or any(not cid or not name for cid, name in calls):
                    raise SoakError(f"answer without complete tool calls: {data[:300]!r}")
                self.turns_emitted += 1
                if len(self.pending) == self.pending.maxlen:
                    self.abandoned += 1  # the oldest conversation is never answered; the LRU evicts it
                self.pending.append(Pending(tenant, conv, messages, calls, time.monotonic()))
        except SoakError as exc:
            self.fail(kind, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - an unparsable answer
            self.fail(kind, f"bad answer ({type(exc).__name__}: {exc}): {data[:200]!r}")
            return
        st.ok += 1
        st.latencies.append(latency)

    def pick(self, now: float) -> tuple[str, Pending | None]:
        """The next request's kind, and for a repair the (oldest) conversation it answers."""
        kind = self.rng.choices(KINDS, self.weights)[0]
        if kind != "repair":
            return kind, None
        if self.pending and now - self.pending[0].at >= MIN_ANSWER_AGE:
            return kind, self.pending.popleft()
        self.repair_fallbacks += 1
        return "json", None

    # -- the run

    async def sampler(self) -> None:
        """toolmend's RSS every SAMPLE_EVERY seconds, and exactly at the end of the warm-up."""
        next_report, k = 30.0, 0
        while True:
            t = time.monotonic() - self.t0
            self.samples.append((round(t, 2), tree_rss_kb(self.proxy.pid)))
            if not self.proxy.alive():
                self.proxy_died = True
                self.fail("json", f"toolmend exited with code {self.proxy.popen.returncode}")
                self.stop.set()
                return
            if t + 0.5 >= next_report:
                next_report += 30.0
                sent = sum(s.sent for s in self.stats.values())
                errs = sum(s.errors for s in self.stats.values())
                log(f"  t={t:5.0f} s  sent {sent:>7}  errors {errs}  in flight {len(self.tasks):>3}  "
                    f"toolmend RSS {self.samples[-1][1] / 1024:.1f} MB")
            while k * SAMPLE_EVERY <= t + 0.5:
                k += 1
            at = k * SAMPLE_EVERY
            if t + 0.5 < self.warm < at:
                at = self.warm
            try:
                await asyncio.wait_for(self.stop.wait(), max(0.0, self.t0 + at - time.monotonic()))
                return
            except TimeoutError:
                pass

    async def snapshot(self, label: str) -> None:
        """Debug mode: ask the proxy for a memory snapshot and wait for it."""
        if self.debug_dir is None:
            return
        k = len(self.snapshots) + 1
        t = time.monotonic() - self.t0
        os.kill(self.proxy.pid, signal.SIGUSR1)
        path = self.debug_dir / f"snap-{k}.json"
        for _ in range(600):
            if path.exists():
                info = json.loads(path.read_text())
                self.snapshots.append({"label": label, "t": round(t, 1), "k": k, **info})
                log(f"  snapshot {k} ({label}) at t={t:.0f} s: stores {info['stores']}, gc objects {info['gc_objects']}, "
                    f"traced {info['traced']}")
                return
            await asyncio.sleep(0.1)
        log(f"  snapshot {k} ({label}): no answer from toolmend")

    async def debug_snapshots(self, warm: float, duration: float) -> None:
        for label, at in (("after warm-up", warm), ("middle", (warm + duration) / 2)):
            delay = self.t0 + at - time.monotonic()
            try:
                await asyncio.wait_for(self.stop.wait(), max(0.0, delay))
                return
            except TimeoutError:
                await self.snapshot(label)

    async def run(self) -> None:
        import httpx

        a = self.args
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.interrupt)
        limits = httpx.Limits(max_connections=a.concurrency, max_keepalive_connections=a.concurrency)
        sem = asyncio.Semaphore(a.concurrency)
        async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(a.timeout), trust_env=False) as client:
            self.t0 = time.monotonic()
            sampler = asyncio.create_task(self.sampler())
            debug = asyncio.create_task(self.debug_snapshots(self.warm, a.duration))
            i = 0
            while not self.stop.is_set():
                due = self.t0 + i / a.rate
                if due - self.t0 >= a.duration:
                    break
                delay = due - time.monotonic()
                if delay > 0:
                    try:
                        await asyncio.wait_for(self.stop.wait(), delay)
                        break
                    except TimeoutError:
                        pass
                # Bounded concurrency: a saturated proxy shows up as send lag and latency; what is still
                # unsent when the time is up is counted as missed (an error), so the run ends on time.
                try:
                    await asyncio.wait_for(sem.acquire(), max(0.001, self.t0 + a.duration - time.monotonic()))
                except TimeoutError:
                    break
                now = time.monotonic()
                if now - self.t0 >= a.duration:
                    sem.release()
                    break
                self.lags.append(now - due)
                task = asyncio.create_task(self.one(client, *self.pick(now), due))
                self.tasks.add(task)
                task.add_done_callback(lambda t: (self.tasks.discard(t), sem.release()))
                i += 1
            self.sched_end = time.monotonic()
            self.missed = max(0, int(math.ceil(a.duration * a.rate)) - i) if not self.stop.is_set() else 0
            if self.missed:
                self.errors.insert(0, {"t": round(self.sched_end - self.t0, 3), "kind": "missed", "error": (
                    f"{self.missed} scheduled requests not sent in time: {a.concurrency} were in flight "
                    f"(--concurrency); toolmend did not keep up with {a.rate:g} req/s")})
            if self.interrupted:
                for t in list(self.tasks):
                    t.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            self.end = time.monotonic()
            self.stop.set()
            await sampler
            await debug
            if not self.proxy_died:
                self.samples.append((round(self.end - self.t0, 2), tree_rss_kb(self.proxy.pid)))
                if not self.interrupted:
                    await self.snapshot("end")
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)

    def interrupt(self) -> None:
        if not self.interrupted:
            log("interrupted: stopping the load")
        self.interrupted = True
        self.stop.set()
        for t in list(self.tasks):
            t.cancel()


# ----------------------------------------------------------------------------- report


def rss_at(samples: list[tuple[float, int]], t: float) -> tuple[float, int] | None:
    after = [s for s in samples if s[0] >= t]
    return after[0] if after else (samples[-1] if samples else None)


def slope_mb_per_min(samples: list[tuple[float, int]]) -> float | None:
    if len(samples) < 3:
        return None
    xs, ys = [s[0] for s in samples], [s[1] / 1024 for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None


def compare_snapshots(debug_dir: Path, snaps: list[dict], top: int = 15) -> list[dict]:
    """tracemalloc growth between the after-warm-up snapshot and the last one, by source line."""
    import tracemalloc

    if len(snaps) < 2:
        return []
    first, last = snaps[0]["k"], snaps[-1]["k"]
    try:
        a = tracemalloc.Snapshot.load(str(debug_dir / f"snap-{first}.tracemalloc"))
        b = tracemalloc.Snapshot.load(str(debug_dir / f"snap-{last}.tracemalloc"))
    except OSError:
        return []
    keep = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")]
    diff = b.filter_traces(keep).compare_to(a.filter_traces(keep), "lineno")
    return [
        {"where": str(s.traceback[0]), "size_diff_kb": round(s.size_diff / 1024, 1), "size_kb": round(s.size / 1024, 1),
         "count_diff": s.count_diff}
        for s in diff[:top]
    ]


def build_report(load: Load, args: argparse.Namespace, proxy: Proc, upstream: Proc, debug_dir: Path | None) -> tuple[dict, str, int]:
    st = load.stats
    elapsed = load.end - load.t0
    sent = sum(s.sent for s in st.values())
    ok = sum(s.ok for s in st.values())
    errors = sum(s.errors for s in st.values()) + load.missed  # a missed send counts as a failed request
    samples = load.samples
    start = samples[0] if samples else None
    warm = rss_at(samples, load.warm)
    end = samples[-1] if samples else None
    growth = (end[1] - warm[1]) * 100.0 / warm[1] if warm and end and warm[1] else None
    after_warm = [s for s in samples if s[0] >= load.warm]
    late = sum(1 for x in load.lags if x > 0.1)
    per_kind = {
        k: {
            "sent": s.sent, "ok": s.ok, "errors": s.errors,
            "p50_ms": (pct(s.latencies, 50) or 0) * 1000 if s.latencies else None,
            "p99_ms": (pct(s.latencies, 99) or 0) * 1000 if s.latencies else None,
            "max_ms": max(s.latencies) * 1000 if s.latencies else None,
        }
        for k, s in st.items()
    }
    tm = compare_snapshots(debug_dir, load.snapshots) if debug_dir else []
    failed = errors > 0 or growth is None or growth >= args.max_growth
    code = 130 if load.interrupted else (1 if failed else 0)
    doc = {
        "meta": {
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
            "args": vars(args), "interrupted": load.interrupted,
            "proxy_command": proxy.popen.args, "upstream_command": upstream.popen.args,
        },
        "requests": {"sent": sent, "ok": ok, "errors": errors, "per_kind": per_kind,
                     "repair_slots_sent_as_json": load.repair_fallbacks, "missed": load.missed},
        "duration_s": round(elapsed, 2),
        "throughput_rps": ok / elapsed if elapsed else 0.0,
        "offered_rps": sent / (load.sched_end - load.t0) if load.sched_end > load.t0 else 0.0,
        "schedule_lag_ms": {"p50": (pct(load.lags, 50) or 0) * 1000, "p99": (pct(load.lags, 99) or 0) * 1000,
                            "max": max(load.lags, default=0) * 1000, "late_over_100ms": late},
        "first_errors": load.errors[: args.show_errors],
        "memory": {
            "turns_remembered": load.turns_emitted, "memory_max_entries": args.memory_max_entries,
            "conversations_abandoned": load.abandoned, "tenants": args.tenants,
        },
        "rss": {
            "warmup_s": load.warm,
            "start_kb": start[1] if start else None,
            "after_warmup_kb": warm[1] if warm else None, "after_warmup_t": warm[0] if warm else None,
            "end_kb": end[1] if end else None,
            "peak_kb": max((s[1] for s in samples), default=None),
            "growth_after_warmup_pct": growth,
            "slope_after_warmup_mb_per_min": slope_mb_per_min(after_warm),
            "samples": samples,
        },
        "cpu_s": {"load_generator": round(sum(os.times()[:2]), 2), "toolmend": load.cpu_proxy, "upstream": load.cpu_upstream},
        "debug_snapshots": load.snapshots,
        "tracemalloc_growth_top": tm,
        "pass": not failed,
    }

    def ms(x):
        return "-" if x is None else f"{x:.1f}"

    def mb(kb):
        return "-" if kb is None else f"{kb / 1024:.1f} MB"

    lines = [
        f"== toolmend soak: {elapsed:.0f} s at {args.rate:g} req/s (mix json/stream/repair {args.mix}), "
        f"{args.tenants} tenants, memory-max-entries {args.memory_max_entries}"
        + (" -- INTERRUPTED" if load.interrupted else "") + " ==",
        f"requests sent {sent} ({', '.join(f'{k} {s.sent}' for k, s in st.items())}); ok {ok}; "
        f"throughput {doc['throughput_rps']:.1f} req/s (offered {doc['offered_rps']:.1f})",
        f"errors {errors}" + (f" ({load.missed} scheduled but never sent)" if load.missed else "")
        + ("" if errors == 0 else "  <-- FAIL"),
    ]
    for e in load.errors[: args.show_errors]:
        lines.append(f"  t={e['t']:.1f} s {e['kind']}: {e['error']}")
    lines.append("latency from the scheduled time (ms):   p50      p99      max")
    for k, v in per_kind.items():
        lines.append(f"  {k:<8}{v['sent']:>26}  {ms(v['p50_ms']):>7}  {ms(v['p99_ms']):>7}  {ms(v['max_ms']):>7}")
    lag = doc["schedule_lag_ms"]
    lines.append(f"send lag p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, max {lag['max']:.1f} ms; {late} sends > 100 ms late")
    lines.append(
        f"memory: {load.turns_emitted} tool-call turns remembered by toolmend over the run "
        f"({'over' if load.turns_emitted > args.memory_max_entries else 'UNDER'} --memory-max-entries "
        f"{args.memory_max_entries}: the LRU bound was {'exercised' if load.turns_emitted > args.memory_max_entries else 'not reached'}); "
        f"{load.abandoned} conversations never answered"
    )
    r = doc["rss"]
    growth_txt = "-" if growth is None else f"{growth:+.2f} %"
    slope = r["slope_after_warmup_mb_per_min"]
    lines.append(
        f"toolmend RSS: start {mb(r['start_kb'])}, after warm-up (t={r['after_warmup_t']} s) {mb(r['after_warmup_kb'])}, "
        f"end {mb(r['end_kb'])}, peak {mb(r['peak_kb'])}; growth after warm-up {growth_txt} "
        f"(target < {args.max_growth:g} %)" + ("" if slope is None else f"; trend {slope:+.3f} MB/min")
    )
    c = doc["cpu_s"]
    lines.append(f"CPU seconds: load generator {c['load_generator']}, toolmend {c['toolmend']}, upstream {c['upstream']}")
    if load.snapshots:
        for s in load.snapshots:
            lines.append(f"  snapshot {s['label']} t={s['t']} s: stores {s['stores']}, gc objects {s['gc_objects']}, traced {s['traced']}")
    if tm:
        lines.append("tracemalloc: growth from the after-warm-up snapshot to the last, top lines:")
        for row in tm[:10]:
            lines.append(f"  {row['size_diff_kb']:>+9.1f} KB {row['count_diff']:>+7} blocks  {row['where']}")
    lines.append("INTERRUPTED (partial results)" if load.interrupted else ("PASS" if not failed else "FAIL"))
    return doc, "\n".join(lines), code


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="toolmend soak test", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    p.add_argument("--rate", type=float, default=100.0, help="requests per second, scheduled by the clock (default 100)")
    p.add_argument("--mix", default="40,30,30", help="weights of json,stream,repair requests (default 40,30,30)")
    p.add_argument("--tenants", type=int, default=1000, help="distinct API keys (default 1000)")
    p.add_argument("--memory-max-entries", type=int, default=5000, help="toolmend's --memory-max-entries (default 5000)")
    p.add_argument("--orphan-policy", default="reject", help="toolmend's --orphan-policy (default reject: a memory miss is an error)")
    p.add_argument("--pending", type=int, default=None,
                   help="conversations waiting for their tool results at most; the oldest is answered first, and "
                        "dropped unanswered when the queue is full (default --memory-max-entries / 5, so answered "
                        "calls are never evicted before their results arrive)")
    p.add_argument("--concurrency", type=int, default=64, help="requests in flight at most (default 64)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds a request (a whole stream) may take (default 30)")
    p.add_argument("--warmup", type=float, default=None, help="warm-up seconds (default 20%% of --duration, at least 30)")
    p.add_argument("--max-growth", type=float, default=10.0, help="RSS growth after warm-up that fails the run, %% (default 10)")
    p.add_argument("--log-level", default="warning", help="toolmend's --log-level (default warning)")
    p.add_argument("--debug-memory", action="store_true",
                   help=f"trace toolmend with tracemalloc ({DEBUG_ENV}) and report what grew (slows it down)")
    p.add_argument("--tracemalloc-frames", type=int, default=1, help="frames per trace with --debug-memory (default 1)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--show-errors", type=int, default=5, help="errors shown in the report (default 5)")
    p.add_argument("--out", default=str(RESULTS), help=f"JSON results (default {RESULTS.relative_to(REPO)})")
    p.add_argument("--keep", action="store_true", help="keep the run directory (logs, snapshots)")
    a = p.parse_args(argv)
    if a.pending is None:
        a.pending = max(10, a.memory_max_entries // 5)
    weights = a.mix.split(",")
    if len(weights) != 3 or not all(w.strip().isdigit() for w in weights) or sum(int(w) for w in weights) == 0:
        p.error("--mix wants three non-negative integers, e.g. 40,30,30")
    if a.duration <= 0 or a.rate <= 0 or a.tenants < 1 or a.concurrency < 1 or a.timeout <= 0 or a.memory_max_entries < 1:
        p.error("--duration, --rate, --tenants, --concurrency, --timeout and --memory-max-entries must be positive")
    return a


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_upstream"]:
        serve_upstream(int(argv[1]))
        return 0
    if argv[:1] == ["_proxy"]:
        return run_proxy_with_hooks(argv[1:])
    args = parse_args(argv)
    warm = args.warmup if args.warmup is not None else max(0.2 * args.duration, 30.0)
    warm = min(warm, args.duration)

    rundir = Path(tempfile.mkdtemp(prefix="toolmend-soak-"))
    up_port, proxy_port = free_port(), free_port()
    upstream = proxy = None
    debug_dir = None
    code = 2
    try:
        upstream = Proc("upstream", [sys.executable, str(Path(__file__).resolve()), "_upstream", str(up_port)], rundir, REPO, grace_seconds=15)
        reason = wait_http(up_port, "/v1/models", upstream)
        if reason:
            log(f"strict upstream failed to start: {reason}")
            return 2
        serve = ["serve", "--upstream", f"http://127.0.0.1:{up_port}/v1", "--host", "127.0.0.1", "--port", str(proxy_port),
                 "--memory", "memory://", "--memory-max-entries", str(args.memory_max_entries),
                 "--orphan-policy", args.orphan_policy, "--log-level", args.log_level]
        env = dict(os.environ)
        if args.debug_memory:
            debug_dir = rundir / "snapshots"
            debug_dir.mkdir()
            env[DEBUG_ENV] = str(args.tracemalloc_frames)
            env[DEBUG_DIR_ENV] = str(debug_dir)
            cmd = [sys.executable, str(Path(__file__).resolve()), "_proxy", *serve]
        else:
            cmd = [sys.executable, "-m", "proxy", *serve]
        proxy = Proc("toolmend", cmd, rundir, REPO, env, grace_seconds=15)
        reason = wait_http(proxy_port, "/healthz", proxy)
        if reason:
            log(f"toolmend failed to start: {reason}")
            return 2
        log(f"strict upstream on 127.0.0.1:{up_port} (pid {upstream.pid}), toolmend on 127.0.0.1:{proxy_port} "
            f"(pid {proxy.pid}); run dir {rundir}")
        log(f"load: {args.duration:g} s at {args.rate:g} req/s, warm-up {warm:g} s, mix json/stream/repair {args.mix}")

        load = Load(args, f"http://127.0.0.1:{proxy_port}/v1/chat/completions", proxy, debug_dir)
        load.warm = warm
        cpu0 = (tree_cpu_seconds(proxy.pid), tree_cpu_seconds(upstream.pid))
        try:
            import uvloop

            runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
        except ImportError:
            runner = asyncio.Runner()
        with runner:
            runner.run(load.run())
        load.cpu_proxy = round(tree_cpu_seconds(proxy.pid) - cpu0[0], 2)
        load.cpu_upstream = round(tree_cpu_seconds(upstream.pid) - cpu0[1], 2)

        doc, text, code = build_report(load, args, proxy, upstream, debug_dir)
        print(text, flush=True)
        if code != 0:
            tail = proxy.tail(8)
            if tail:
                log("toolmend log (last lines):\n  " + tail.replace("\n", "\n  "))
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2) + "\n")
        log(f"results written to {out}")
        return code
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        for p in (proxy, upstream):
            if p is not None:
                p.stop()
        if args.keep or (code not in (0, 130) and debug_dir is not None):
            log(f"run directory kept: {rundir}")
        else:
            shutil.rmtree(rundir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
