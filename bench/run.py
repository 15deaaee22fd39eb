#!/usr/bin/env python3
"""toolmend benchmark harness: one command, every target, the numbers docs/benchmarks.md compares.

    python bench/run.py                              # all targets, every scenario
    python bench/run.py --duration 3 --targets direct,nginx,naive
    python bench/run.py --only messages,messages-stream
    python bench/run.py --rounds 2 --target w2='{python} -m proxy serve --workers 2 --upstream {upstream} --port {port}'

What it does: starts the nginx+Lua mock upstream (fixed answers) pinned to CPU 0, then for each
target starts the proxy under test pinned to CPU 1, waits until it answers (10 s at most),
checks one answer of every scenario, warms it up and measures it with wrk (pinned to CPU 0):
32 connections for throughput and p50/p99, then 1 connection for latency; one scenario after
the other (SCENARIOS: Chat Completions, the Responses API, Anthropic Messages and Gemini's native API,
JSON and streamed each). The proxy's CPU time (user + system of the process and all its descendants,
from /proc) is divided by the requests served. With --rounds N the targets are measured N
times, in a rotated order, and medians reported.

Command placeholders for --target: {port} (where the proxy must listen), {upstream}
(http://127.0.0.1:MOCKPORT/v1), {mock_port}, {python} (this interpreter), {repo}.
Commands run through `sh -c 'exec ...'` from the repository root.

Stdlib only; needs nginx with the Lua module, wrk and taskset (see bench/README.md).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import http.client
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from procs import Proc, free_port, proc_tree, tree_cpu_seconds  # bench/ is on sys.path when a script here runs

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
MOCK_DIR = BENCH / "mock"
TEMPLATE = MOCK_DIR / "nginx.conf.template"
POST_LUA = BENCH / "post.lua"
RESULTS = BENCH / "results" / "latest.json"
NGINX_MODULES = ("/usr/lib/nginx/modules/ndk_http_module.so", "/usr/lib/nginx/modules/ngx_http_lua_module.so")
APT_HINT = "apt-get install -y nginx libnginx-mod-http-lua wrk"

BUILTIN = {
    "direct": None,  # the mock itself
    "nginx": None,  # nginx proxy_pass with a keepalive upstream, rendered from the template
    "naive": "{python} bench/naive_proxy.py --upstream {upstream} --port {port}",
    "toolmend": "{python} -m proxy serve --upstream {upstream} --host 127.0.0.1 --port {port}",
}
BASELINES = ("direct", "nginx", "naive")
START_TIMEOUT = 10.0

# ----------------------------------------------------------------------------- scenarios

OPENAI_HEADERS = ("Authorization: Bearer sk-bench",)
ANTHROPIC_HEADERS = ("x-api-key: sk-bench", "anthropic-version: 2023-06-01")
GEMINI_HEADERS = ("x-goog-api-key: sk-bench",)
#: Gemini's model and streaming are in the path; the version stays in it (the mock serves it below /v1 too).
GEMINI_PATH = "/v1beta/models/gemini-3-pro-preview:"
TOOL = "get_weather"  # the call in every answer of the mock (bench/mock/mock.lua)
REPAIRS_HEADER = "x-toolmend-repairs"
MEMORY_HEADER = "x-toolmend-memory"


def sse_frames(data: bytes) -> list[tuple[str | None, str]]:
    """(event name or None, data) of each event of an SSE body."""
    frames = []
    for frame in data.replace(b"\r\n", b"\n").decode().split("\n\n"):
        if frame.strip():
            fields = dict(line.split(": ", 1) for line in frame.split("\n") if ": " in line)
            frames.append((fields.get("event"), fields.get("data", "")))
    return frames


def json_answer(valid: Callable[[dict], object]) -> Callable[[bytes], str | None]:
    """Check of a JSON answer: it parses and ``valid`` holds (a missing key counts as not holding)."""

    def check(data: bytes) -> str | None:
        try:
            ok = valid(json.loads(data))
        except (ValueError, KeyError, IndexError, TypeError):
            ok = False
        return None if ok else f"JSON answer is not the mock's: {data[:200]!r}"

    return check


def stream_answer(events: int, last: str) -> Callable[[bytes], str | None]:
    """Check of a streamed answer: ``events`` events, the last named ``last`` (its data, when unnamed),
    and each named event's data of that type."""

    def check(data: bytes) -> str | None:
        frames = sse_frames(data)
        end = (frames[-1][0] or frames[-1][1]) if frames else None
        if len(frames) != events or end != last:
            return f"stream answer has {len(frames)} events ending {end!r} (want {events} ending {last!r})"
        for name, payload in frames:
            if name is not None and json.loads(payload).get("type") != name:
                return f"event {name!r} carries data of type {json.loads(payload).get('type')!r}"
        return None

    return check


def gemini_stream_answer(events: int) -> Callable[[bytes], str | None]:
    """Check of a Gemini event stream: ``events`` events (none named, no terminal one), the last one's part the call."""

    def check(data: bytes) -> str | None:
        frames = sse_frames(data)
        try:
            name = json.loads(frames[-1][1])["candidates"][0]["content"]["parts"][0]["functionCall"]["name"]
        except (ValueError, KeyError, IndexError, TypeError):
            name = None
        if len(frames) != events or name != TOOL:
            return f"stream answer has {len(frames)} events, the last one calling {name!r} (want {events}, calling {TOOL!r})"
        return None

    return check


@dataclass(frozen=True)
class Scenario:
    name: str  # as --only names it, and the key in the results
    title: str
    path: str
    body: Path
    headers: tuple[str, ...]  # "Name: value", as post.lua takes them
    check: Callable[[bytes], str | None]
    stream: bool = False

    @property
    def unit(self) -> str:
        return "streams/s" if self.stream else "req/s"

    @property
    def goals(self) -> bool:
        """The project's goals (docs/performance.md) are set on the JSON scenarios; streams are reported."""
        return not self.stream


SCENARIOS = {s.name: s for s in (
    Scenario("json", "Chat Completions, JSON", "/v1/chat/completions", BENCH / "request.json", OPENAI_HEADERS,
             json_answer(lambda a: a["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == TOOL)),
    Scenario("stream", "Chat Completions, streaming (20 chunks + [DONE])", "/v1/chat/completions",
             BENCH / "request_stream.json", OPENAI_HEADERS, stream_answer(21, "[DONE]"), stream=True),
    Scenario("responses", "Responses API, JSON", "/v1/responses", BENCH / "request_responses.json", OPENAI_HEADERS,
             json_answer(lambda a: a["output"][0]["encrypted_content"] and a["output"][1]["name"] == TOOL)),
    Scenario("responses-stream", "Responses API, streaming (26 events to response.completed)", "/v1/responses",
             BENCH / "request_responses_stream.json", OPENAI_HEADERS, stream_answer(26, "response.completed"), stream=True),
    Scenario("messages", "Anthropic Messages, JSON", "/v1/messages", BENCH / "request_messages.json", ANTHROPIC_HEADERS,
             json_answer(lambda a: a["content"][0]["signature"] and a["content"][1]["name"] == TOOL)),
    Scenario("messages-stream", "Anthropic Messages, streaming (26 events to message_stop)", "/v1/messages",
             BENCH / "request_messages_stream.json", ANTHROPIC_HEADERS, stream_answer(26, "message_stop"), stream=True),
    Scenario("gemini", "Gemini native, JSON (generateContent)", GEMINI_PATH + "generateContent", BENCH / "request_gemini.json",
             GEMINI_HEADERS, json_answer(lambda a: a["candidates"][0]["content"]["parts"][1]["functionCall"]["name"] == TOOL)),
    Scenario("gemini-stream", "Gemini native, streaming (streamGenerateContent?alt=sse, 20 events)",
             GEMINI_PATH + "streamGenerateContent?alt=sse", BENCH / "request_gemini.json", GEMINI_HEADERS,
             gemini_stream_answer(20), stream=True),
)}

# ----------------------------------------------------------------------------- utilities


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)





def render_nginx(rundir: Path, role: str, mock_port: int, proxy_port: int) -> Path:
    """Write rundir/nginx.conf from the template, keeping the server blocks of `role`."""
    text = TEMPLATE.read_text()
    for block in ("mock", "proxy"):
        if role not in (block, "both"):
            text = re.sub(rf"#@{block}-begin.*?#@{block}-end\n", "", text, flags=re.S)
    user_line = "user root root;" if os.geteuid() == 0 else ""
    for key, value in {
        "RUNDIR": str(rundir),
        "LUADIR": str(MOCK_DIR),
        "MOCK_PORT": str(mock_port),
        "PROXY_PORT": str(proxy_port),
        "USER_LINE": user_line,
    }.items():
        text = text.replace("{{" + key + "}}", value)
    rundir.mkdir(parents=True, exist_ok=True)
    conf = rundir / "nginx.conf"
    conf.write_text(text)
    return conf


def nginx_cmd(rundir: Path) -> str:
    return f"nginx -p {rundir}/ -c {rundir}/nginx.conf -e {rundir}/error.log"








def tree_wait_seconds(root: int) -> float:
    """How long the threads of root and its descendants were ready to run but waited for a CPU (``run_delay``
    of /proc/PID/task/TID/schedstat): other work on the proxy's CPUs, mostly, or its own other threads."""
    total = 0
    for pid in proc_tree(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return total / 1e9


def pinned(name: str, command: str, cpus: str, rundir: Path) -> Proc:
    """A shell command run pinned to ``cpus`` with taskset, in its own session, logging to rundir."""
    return Proc(name, ["taskset", "-c", cpus, "sh", "-c", "exec " + command], rundir, REPO)


def post(port: int, scenario: Scenario, timeout: float = 5.0) -> tuple[int, http.client.HTTPMessage, bytes]:
    """The scenario's request: the answer's status, headers and body."""
    headers = dict(h.split(": ", 1) for h in scenario.headers)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", scenario.path, body=scenario.body.read_bytes(),
                     headers={"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def wait_ready(port: int, proc: Proc | None, scenario: Scenario, timeout: float = START_TIMEOUT) -> str | None:
    """Poll until the port answers an HTTP request. Returns None when up, else a reason."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            return f"exited with code {proc.popen.returncode}"
        try:
            post(port, scenario, timeout=2.0)
            return None
        except (OSError, http.client.HTTPException) as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    return f"did not answer within {timeout:.0f} s ({last})"


def check_answers(port: int, scenarios: list[Scenario]) -> str | None:
    """One request of each scenario must come back as the mock sent it, and unrepaired: the request bodies
    are valid histories, which a repairing proxy forwards as they are."""
    for scenario in scenarios:
        status, headers, data = post(port, scenario)
        if status != 200:
            return f"{scenario.name}: answered {status}: {data[:200]!r}"
        if headers.get(REPAIRS_HEADER):
            return f"{scenario.name}: the valid history was repaired ({REPAIRS_HEADER}: {headers[REPAIRS_HEADER]})"
        reason = scenario.check(data)
        if reason is not None:
            return f"{scenario.name}: {reason}"
    # A store that failed the answers above says so from the next one on: measured, it would remember nothing
    # (an older checkout on a file a newer one migrated, say).
    if scenarios and (memory := post(port, scenarios[0])[1].get(MEMORY_HEADER)):
        return f"its memory store is unavailable ({MEMORY_HEADER}: {memory}): it would be measured remembering nothing"
    return None


def run_wrk(port: int, scenario: Scenario, conns: int, threads: int, duration: int, cpus: str) -> dict:
    url = f"http://127.0.0.1:{port}{scenario.path}"
    cmd = [
        "taskset", "-c", cpus, "wrk", f"-t{threads}", f"-c{conns}", f"-d{duration}s",
        "--timeout", "10s", "-s", str(POST_LUA), url, "--", str(scenario.body), *scenario.headers,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60, cwd=REPO)
    m = re.search(r"^BENCH_RESULT (\{.*\})$", out.stdout, re.M)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed ({out.returncode}): {out.stdout[-500:]} {out.stderr[-500:]}")
    return json.loads(m.group(1))


# ----------------------------------------------------------------------------- targets


class Target:
    def __init__(self, name: str, command: str | None):
        self.name = name
        self.command = command
        self.status = "pending"  # ok | unavailable
        self.note = ""
        self.proc: Proc | None = None
        self.port = 0

    def start(self, ctx: "Ctx") -> str | None:
        """Start the target (if it is a process). Returns None when it answers, else a reason."""
        if self.name == "direct":
            self.port, self.proc = ctx.mock_port, None
            return None
        self.port = free_port()
        if self.name == "nginx":
            rundir = ctx.rundir / f"nginx-proxy-{self.port}"
            render_nginx(rundir, "proxy", ctx.mock_port, self.port)
            command = nginx_cmd(rundir)
        else:
            command = self.command or ""
            for key, value in {
                "port": str(self.port),
                "upstream": f"http://127.0.0.1:{ctx.mock_port}/v1",
                "mock_port": str(ctx.mock_port),
                "python": sys.executable,
                "repo": str(REPO),
            }.items():
                command = command.replace("{" + key + "}", value)
        self.proc = pinned(f"{self.name}-{self.port}", command, ctx.args.proxy_cpus, ctx.rundir)
        reason = wait_ready(self.port, self.proc, ctx.scenarios[0])
        if reason is None:
            try:
                reason = check_answers(self.port, ctx.scenarios)
            except (OSError, http.client.HTTPException) as exc:
                reason = f"check failed: {type(exc).__name__}: {exc}"
        if reason is not None:
            tail = self.proc.tail()
            self.stop()
            return reason + (f"\n    log: {tail.replace(chr(10), chr(10) + '    log: ')}" if tail else "")
        return None

    def cpu(self) -> float | None:
        return tree_cpu_seconds(self.proc.pid) if self.proc else None

    def waited(self) -> float | None:
        return tree_wait_seconds(self.proc.pid) if self.proc else None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


class Ctx:
    def __init__(self, args: argparse.Namespace, rundir: Path, mock_port: int, scenarios: list[Scenario]):
        self.args, self.rundir, self.mock_port, self.scenarios = args, rundir, mock_port, scenarios


def measure(ctx: Ctx, target: Target, scenario: Scenario, round_no: int) -> list[dict]:
    a = ctx.args
    out = []
    if a.warmup > 0:
        run_wrk(target.port, scenario, a.connections, 2, a.warmup, a.load_cpus)
    plan = [(a.connections, 2, a.duration), (1, 1, a.duration1)]
    for conns, threads, duration in plan:
        if target.proc is not None and not target.proc.alive():
            raise RuntimeError(f"{target.name} died: {target.proc.tail()}")
        cpu0, wait0 = target.cpu(), target.waited()
        res = run_wrk(target.port, scenario, conns, threads, duration, a.load_cpus)
        cpu1, wait1 = target.cpu(), target.waited()
        secs = res["duration_us"] / 1e6
        n = res["requests"]
        errors = sum(res[k] for k in res if k.startswith("err_"))
        row = {
            "target": target.name,
            "scenario": scenario.name,
            "connections": conns,
            "round": round_no,
            "requests": n,
            "seconds": round(secs, 3),
            "rps": n / secs if secs else 0.0,
            "p50_ms": res["p50_us"] / 1000,
            "p90_ms": res["p90_us"] / 1000,
            "p99_ms": res["p99_us"] / 1000,
            "p999_ms": res["p999_us"] / 1000,
            "max_ms": res["lat_max_us"] / 1000,
            "errors": errors,
            "wrk": res,
            "cpu_us_per_req": ((cpu1 - cpu0) * 1e6 / n) if (cpu0 is not None and n) else None,
            "cpu_wait_pct": ((wait1 - wait0) * 100 / secs) if (wait0 is not None and secs) else None,
        }
        out.append(row)
        log(
            f"  {target.name:<10} {scenario.name:<16} c={conns:<3} {row['rps']:>10.0f} {scenario.unit:<9}  "
            f"p50 {row['p50_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms  "
            f"cpu {fmt(row['cpu_us_per_req'], 0)} us/req  waited {fmt(row['cpu_wait_pct'], 1)} %  errors {errors}"
        )
    return out


# ----------------------------------------------------------------------------- report


def fmt(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def summarize(runs: list[dict]) -> dict:
    summary: dict = {}
    groups: dict = {}
    for r in runs:
        groups.setdefault((r["scenario"], r["target"], r["connections"]), []).append(r)
    for (scenario, target, conns), rows in groups.items():
        med = {}
        for key in ("rps", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "cpu_us_per_req", "cpu_wait_pct"):
            vals = [r[key] for r in rows if r[key] is not None]
            med[key] = statistics.median(vals) if vals else None
        med["errors"] = sum(r["errors"] for r in rows)
        med["rounds"] = len(rows)
        summary.setdefault(scenario, {}).setdefault(target, {})[f"c{conns}"] = med
    return summary


def get(summary: dict, scenario: str, target: str, conns: str, key: str):
    return summary.get(scenario, {}).get(target, {}).get(conns, {}).get(key)


def ratios(summary: dict, candidates: list[str], conns: int) -> dict:
    c = f"c{conns}"
    out: dict = {}
    for cand in candidates + ["naive"]:
        r: dict = {}
        for scenario in summary:
            def div(a, b):
                return a / b if a is not None and b else None

            def sub(a, b):
                return a - b if a is not None and b is not None else None

            r[scenario] = {
                f"throughput_vs_naive_{c}": div(get(summary, scenario, cand, c, "rps"), get(summary, scenario, "naive", c, "rps")),
                f"p99_vs_naive_{c}": div(get(summary, scenario, cand, c, "p99_ms"), get(summary, scenario, "naive", c, "p99_ms")),
                "added_p50_ms_c1": sub(get(summary, scenario, cand, "c1", "p50_ms"), get(summary, scenario, "direct", "c1", "p50_ms")),
                "added_p99_ms_c1": sub(get(summary, scenario, cand, "c1", "p99_ms"), get(summary, scenario, "direct", "c1", "p99_ms")),
            }
        out[cand] = r
    return out


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


def report(summary: dict, rat: dict, targets: list[Target], args: argparse.Namespace) -> str:
    c = f"c{args.connections}"
    rounds = f"median of {args.rounds} rounds" if args.rounds > 1 else "1 round"
    measured = [s for s in SCENARIOS.values() if s.name in summary]
    parts = []
    for scenario in measured:
        name, unit, title = scenario.name, scenario.unit, scenario.title
        names = [t.name for t in targets if t.name in summary[name]]
        rows = []
        for n in names:
            rows.append([
                n,
                fmt(get(summary, name, n, c, "rps"), 0),
                fmt(get(summary, name, n, c, "p50_ms"), 3),
                fmt(get(summary, name, n, c, "p99_ms"), 3),
                fmt(get(summary, name, n, c, "cpu_us_per_req"), 0),
                fmt(get(summary, name, n, c, "cpu_wait_pct"), 1),
                str(get(summary, name, n, c, "errors")),
            ])
        parts.append(f"== {title}, {args.connections} connections, {args.duration} s ({rounds}) ==")
        parts.append(table(["target", unit, "p50 ms", "p99 ms", "proxy CPU us/req", "CPU wait %", "errors"], rows))
        rows = []
        direct = get(summary, name, "direct", "c1", "p50_ms")
        for n in names:
            p50 = get(summary, name, n, "c1", "p50_ms")
            rows.append([
                n,
                fmt(get(summary, name, n, "c1", "rps"), 0),
                fmt(p50, 3),
                fmt(p50 - direct if p50 is not None and direct is not None else None, 3),
                fmt(get(summary, name, n, "c1", "p99_ms"), 3),
                fmt(get(summary, name, n, "c1", "cpu_us_per_req"), 0),
                fmt(get(summary, name, n, "c1", "cpu_wait_pct"), 1),
                str(get(summary, name, n, "c1", "errors")),
            ])
        parts.append(f"\n== {title}, 1 connection, {args.duration1} s ({rounds}) ==")
        parts.append(table(["target", unit, "p50 ms", "p50 added vs direct", "p99 ms", "proxy CPU us/req", "CPU wait %", "errors"], rows))
        parts.append("")

    def shown(value: float | None, digits: int, judged: bool, ok: Callable[[float], bool]) -> str:
        """The value, with its verdict when it is judged against a goal."""
        if not judged or value is None:
            return fmt(value, digits)
        return f"{fmt(value, digits)} {'PASS' if ok(value) else 'FAIL'}"

    parts.append("== Ratios the project cares about (goals on the JSON rows; streams reported) ==")
    rows = []
    for cand, r in rat.items():
        vs_naive = cand != "naive"
        for scenario in measured:
            m = r.get(scenario.name, {})
            judged = scenario.goals and vs_naive
            rows.append([
                cand,
                scenario.name,
                shown(m.get(f"throughput_vs_naive_{c}") if vs_naive else None, 2, judged, lambda v: v >= 2),
                shown(m.get(f"p99_vs_naive_{c}") if vs_naive else None, 2, judged, lambda v: v <= 0.5),
                shown(m.get("added_p50_ms_c1"), 3, judged, lambda v: v < 0.5),
                fmt(m.get("added_p99_ms_c1"), 3),
            ])
    parts.append(table([
        "target",
        "scenario",
        f"thr/naive @{args.connections} (>=2)",
        f"p99/naive @{args.connections} (<=0.5)",
        "added p50 @1 ms (<0.5)",
        "added p99 @1 ms",
    ], rows))
    down = [t for t in targets if t.status != "ok"]
    if down:
        parts.append("")
        for t in down:
            parts.append(f"target {t.name}: {t.status.upper()}: {t.note.splitlines()[0] if t.note else ''}")
    return "\n".join(parts)


# ----------------------------------------------------------------------------- main


def preflight() -> None:
    missing = [tool for tool in ("nginx", "wrk", "taskset") if shutil.which(tool) is None]
    missing += [m for m in NGINX_MODULES if not os.path.exists(m)]
    if missing:
        sys.exit(f"missing: {', '.join(missing)}\ninstall with: {APT_HINT}")
    if (os.cpu_count() or 1) < 2:
        log("warning: fewer than 2 CPUs; pinning load and proxy to separate cores is impossible")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="toolmend benchmark harness", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--duration", type=int, default=None, help="seconds per measurement (default 10 at 32 connections, 5 at 1)")
    p.add_argument("--duration1", type=int, default=None, help="seconds per 1-connection measurement (default: 5, or --duration)")
    p.add_argument("--warmup", type=int, default=2, help="seconds of 32-connection warm-up before each scenario (0: none)")
    p.add_argument("--rounds", type=int, default=1, help="measure every target N times, interleaved; report medians")
    p.add_argument("--only", metavar="NAME[,NAME]", help="these scenarios only: " + ", ".join(SCENARIOS) + " (default: all)")
    p.add_argument("--targets", help="comma-separated targets to run (default: all built-in and --target ones)")
    p.add_argument("--target", action="append", default=[], metavar="NAME=CMD", help="extra target: shell command with {port} and {upstream}")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--load-cpus", default="0", help="CPUs for the mock and wrk (taskset -c)")
    p.add_argument("--proxy-cpus", default="1", help="CPUs for the proxy under test (taskset -c)")
    p.add_argument("--out", default=str(RESULTS), help="JSON results file")
    p.add_argument("--keep", action="store_true", help="keep the run directory (configs and logs)")
    p.add_argument("--render-mock", metavar="DIR", help="only write an nginx.conf with both server blocks into DIR and print how to run it")
    a = p.parse_args(argv)
    if a.duration1 is None:
        a.duration1 = a.duration if a.duration is not None else 5
    if a.duration is None:
        a.duration = 10
    if min(a.duration, a.duration1) < 1 or a.rounds < 1:
        p.error("durations and rounds must be >= 1")
    a.scenarios = list(dict.fromkeys(n.strip() for n in a.only.split(","))) if a.only else list(SCENARIOS)
    unknown = [n for n in a.scenarios if n not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario {', '.join(unknown)!r}; known: {', '.join(SCENARIOS)}")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render_mock:
        d = Path(args.render_mock).resolve()
        render_nginx(d, "both", 8080, 8081)
        print(f"wrote {d}/nginx.conf (mock on 127.0.0.1:8080, proxy_pass on 127.0.0.1:8081)")
        print(f"run: {nginx_cmd(d)}")
        return 0
    preflight()

    commands = dict(BUILTIN)
    for spec in args.target:
        name, sep, cmd = spec.partition("=")
        if not sep or not name or not cmd:
            sys.exit(f"--target wants NAME=COMMAND, got {spec!r}")
        commands[name.strip()] = cmd
    names = [n.strip() for n in args.targets.split(",")] if args.targets else list(commands)
    for n in names:
        if n not in commands:
            sys.exit(f"unknown target {n!r}; known: {', '.join(commands)}")
    targets = [Target(n, commands[n]) for n in names]
    scenarios = [SCENARIOS[n] for n in args.scenarios]

    rundir = Path(tempfile.mkdtemp(prefix="toolmend-bench-"))
    mock_port = free_port()
    render_nginx(rundir / "mock", "mock", mock_port, 0)
    mock = pinned("mock", nginx_cmd(rundir / "mock"), args.load_cpus, rundir)
    ctx = Ctx(args, rundir, mock_port, scenarios)
    runs: list[dict] = []
    started = time.time()
    try:
        reason = wait_ready(mock_port, mock, scenarios[0]) or check_answers(mock_port, scenarios)
        if reason:
            sys.exit(f"mock upstream failed: {reason}\n{mock.tail()}")
        minutes = len(targets) * args.rounds * len(scenarios) * (args.warmup + args.duration + args.duration1) / 60
        log(f"mock upstream on 127.0.0.1:{mock_port} (pid {mock.pid}); run dir {rundir}")
        log(f"{len(targets)} targets x {args.rounds} rounds x {len(scenarios)} scenarios ({', '.join(args.scenarios)}): "
            f"about {minutes:.0f} min of measurement")
        for round_no in range(args.rounds):
            k = round_no % len(targets)
            order = targets[k:] + targets[:k]
            log(f"round {round_no + 1}/{args.rounds}: {', '.join(t.name for t in order)}")
            for t in order:
                if t.status == "unavailable":
                    continue
                reason = t.start(ctx)
                if reason is not None:
                    t.status, t.note = "unavailable", reason
                    log(f"  {t.name:<10} UNAVAILABLE: {reason}")
                    continue
                t.status = "ok"
                try:
                    for scenario in scenarios:
                        runs.extend(measure(ctx, t, scenario, round_no + 1))
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    t.status, t.note = "unavailable", f"failed during measurement: {exc}"
                    log(f"  {t.name:<10} FAILED: {exc}")
                finally:
                    t.stop()
    finally:
        for t in targets:
            t.stop()
        mock.stop()
        if not args.keep:
            shutil.rmtree(rundir, ignore_errors=True)

    summary = summarize(runs)
    candidates = [t.name for t in targets if t.name not in BASELINES]
    rat = ratios(summary, candidates, args.connections)
    print(report(summary, rat, targets, args))

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "meta": {
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "elapsed_s": round(time.time() - started, 1),
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "nginx": subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip(),
            "args": vars(args),
            "method": "mock+wrk on CPUs %s, proxy on CPUs %s; wrk -t2 -c%d / -t1 -c1; warm-up %d s"
            % (args.load_cpus, args.proxy_cpus, args.connections, args.warmup),
        },
        "targets": {
            t.name: {"command": t.command, "status": t.status, "note": t.note} for t in targets
        },
        "summary": summary,
        "ratios": rat,
        "runs": runs,
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    log(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
