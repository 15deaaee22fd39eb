"""Instructions, not seconds: what a repair or a served request costs, counted by valgrind's callgrind.

On a shared 2-core VM the same run can take 26 ms once and 44 ms the next, so timings only compare within one
run. An instruction count is the same whatever else the machine is doing, which makes it the way to compare two
commits, or today's code with figures measured on another machine. Each figure is the difference between a
process doing the work ``more`` times and one doing it ``fewer`` times, divided by the difference, so start-up
and imports cancel out.

    python bench/instructions.py repair                 # per plan + repair of the repair bench's broken histories, as served
    python bench/instructions.py check                  # per clean check of its valid histories, and per parse of their body
    python bench/instructions.py serve --upstream http://127.0.0.1:8080/v1 [--memory sqlite:///tmp/m.db]
    python bench/instructions.py serve --upstream ... --api responses   # or messages, gemini, gemini-stream; default chat
    python bench/instructions.py serve --upstream ... --repo /tmp/old   # a checkout of another commit

``serve`` runs ``python -m proxy serve`` under callgrind and sends it the bench's JSON requests of one protocol
(``bench/request.json``, ``request_responses.json``, ``request_messages.json`` or ``request_gemini.json``, as
``bench/run.py`` sends them) one after the other on one keep-alive connection; the upstream is the bench mock
(``python bench/run.py --render-mock DIR`` writes it and prints how to start it). ``--repo`` runs another checkout's ``proxy`` (chat only, for
``repair``: older commits have no dialects). Needs ``apt-get install valgrind``.
"""

import argparse
import http.client
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
HERE = BENCH.parent


#: callgrind counting every thread of the command that follows, its profile thrown away: only the total is read.
CALLGRIND = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]


def total(report: str) -> int:
    """The instructions callgrind reports (on stderr) having collected."""
    found = re.search(r"Collected : (\d+)", report)
    if found is None:
        raise SystemExit(f"callgrind printed no total:\n{report[-2000:]}")
    return int(found.group(1))


#: Python's hash randomization moves a count by ~2 % between runs of the same code (set and dict layouts): fixed.
ENV = {**os.environ, "PYTHONHASHSEED": "0"}


def collected(command: list[str], cwd: Path) -> int:
    """Instructions callgrind counted for ``command`` (every thread of it)."""
    return total(subprocess.run([*CALLGRIND, *command], cwd=cwd, env=ENV, capture_output=True, text=True, check=True).stderr)


def per_unit(count: Callable[[int], int], fewer: int, more: int) -> float:
    return (count(more) - count(fewer)) / (more - fewer)


# --- repair -------------------------------------------------------------------------------------------------

def _repair_child(kind: str, times: int) -> None:
    """In the measured process: build ``kind``'s broken history as bench/repair_bench.py does, then plan and
    repair it ``times`` times with what the store would answer, as that checkout's endpoint runs it (with the
    heap frozen for the cycle collector on a large body where it has ``repair_bench.as_served``; older commits did
    not)."""
    sys.path[:0] = [str(Path.cwd()), str(Path.cwd() / "bench")]
    import orjson
    import repair_bench as rb  # the checkout under measurement, found through the cwd

    from proxy.repair import Policy
    try:
        from proxy.dialects.chat.plan import repair
    except ImportError:  # a checkout from before chat was a dialect package
        from proxy.repair import repair  # type: ignore[attr-defined,no-redef]
    rng = random.Random(7)
    if kind == "chat":
        history, remembered = rb.broken_history(2000, rng)
        body = {"model": "x", "messages": history}
        takes_callback = "recall" in repair.__code__.co_varnames[:repair.__code__.co_argcount]
        recalled = (lambda ids: remembered) if takes_callback else remembered  # older commits take a recall callback

        def once() -> object:
            return repair(body, recalled, "openai", Policy())
    else:
        from proxy.dialects import MESSAGES, RESPONSES
        if kind == "responses":
            items, remembered = rb.broken_items(2000, rng)
            dialect, body, profile = RESPONSES, {"model": "gpt-5.5", "input": items}, RESPONSES.profile("openai")
        elif kind == "gemini":
            from proxy.dialects import GEMINI
            contents, remembered = rb.broken_contents(2000, rng)
            dialect, body, profile = GEMINI, {"model": "gemini-3-pro-preview", "contents": contents}, GEMINI.profile("gemini")
        else:
            history, remembered = rb.broken_messages(2000, rng)
            dialect, profile = MESSAGES, MESSAGES.profile("anthropic")
            body = {"model": "claude-sonnet-4-5", "thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 4096, "messages": history}
        planned = dialect.plan(body, profile)
        answered = {key: remembered[key] for key in planned.recall if key in remembered}

        def once() -> object:
            return dialect.plan(body, profile).repair(answered, Policy())
    served = rb.as_served(orjson.dumps(body), once) if hasattr(rb, "as_served") else once
    for _ in range(times):
        served()


def repair_counts(repo: Path, kinds: list[str]) -> None:
    for kind in kinds:
        def count(times: int, kind: str = kind) -> int:
            return collected([sys.executable, str(Path(__file__).resolve()), "_repair", kind, str(times)], repo)
        print(f"{kind:10s} {per_unit(count, 1, 4) / 1e6:8.1f} M instructions per plan + repair")


# --- check --------------------------------------------------------------------------------------------------

def _valid(kind: str) -> tuple[Any, dict[str, Any], Any]:
    """The dialect, the valid 2,000-entry body and the profile of bench/repair_bench.py's clean-check line of ``kind``."""
    import repair_bench as rb

    from proxy.dialects import GEMINI, MESSAGES, RESPONSES
    rng = random.Random(7)
    if kind == "responses":
        return RESPONSES, {"model": "gpt-5.5", "input": rb.valid_items(2000, rng)[0]}, RESPONSES.profile("openai")
    if kind == "messages":
        body = {"model": "claude-sonnet-4-5", "thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 4096,
                "messages": rb.valid_messages(2000, rng)[0]}
        return MESSAGES, body, MESSAGES.profile("anthropic")
    return GEMINI, {"model": "gemini-3-pro-preview", "contents": rb.valid_contents(2000, rng)[0]}, GEMINI.profile("gemini")


def _check_child(kind: str, what: str, times: int) -> None:
    """In the measured process: the clean check (``plan``) of ``kind``'s valid history, or the parse of its body
    (``what``), ``times`` times, each as the endpoint runs it."""
    sys.path[:0] = [str(Path.cwd()), str(Path.cwd() / "bench")]
    import orjson
    import repair_bench as rb
    dialect, body, profile = _valid(kind)
    raw = orjson.dumps(body)
    parsed = orjson.loads(raw)
    if dialect.plan(parsed, profile) is not None:
        raise SystemExit(f"the valid {kind} history needs a repair")
    once = rb.parse_as_served(raw) if what == "parse" else rb.as_served(raw, lambda: dialect.plan(parsed, profile))
    for _ in range(times):
        once()


def check_counts(repo: Path, kinds: list[str]) -> None:
    for kind in kinds:
        found = {}
        for what in ("check", "parse"):
            def count(times: int, what: str = what, kind: str = kind) -> int:
                return collected([sys.executable, str(Path(__file__).resolve()), "_check", kind, what, str(times)], repo)
            found[what] = per_unit(count, 1, 4) / 1e6
        print(f"{kind:10s} {found['check']:8.2f} M instructions per clean check, {found['parse']:8.2f} M per parse "
              f"({found['check'] / found['parse']:.2f} of the parse)")


# --- serve --------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: What ``serve`` posts for each protocol: the path, the body, the headers (as bench/run.py's JSON scenarios).
APIS = {
    "chat": ("/v1/chat/completions", "request.json", {"authorization": "Bearer sk-bench"}),
    "responses": ("/v1/responses", "request_responses.json", {"authorization": "Bearer sk-bench"}),
    "messages": ("/v1/messages", "request_messages.json", {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}),
    "gemini": ("/v1beta/models/gemini-3-pro-preview:generateContent", "request_gemini.json", {"x-goog-api-key": "sk-bench"}),
    "gemini-stream": ("/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse", "request_gemini.json",
                      {"x-goog-api-key": "sk-bench"}),
}


def _send(port: int, requests: int, api: str) -> None:
    path, name, credentials = APIS[api]
    body = (BENCH / name).read_bytes()
    headers = {"content-type": "application/json", **credentials}
    deadline = time.monotonic() + 120  # valgrind starts a Python slowly
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port)
            connection.connect()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    for _ in range(requests):
        connection.request("POST", path, body, headers)
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise SystemExit(f"toolmend answered {answer.status}: is the mock upstream running?")


def serve_count(repo: Path, upstream: str, memory: str, requests: int, api: str) -> int:
    port = _free_port()
    command = [*CALLGRIND, sys.executable, "-m", "proxy", "serve", "--upstream", upstream, "--host", "127.0.0.1",
               "--port", str(port), "--memory", memory]
    with tempfile.TemporaryFile("w+") as log:  # a log line per request: a pipe would fill and stall the server
        server = subprocess.Popen(command, cwd=repo, env=ENV, stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            _send(port, requests, api)
        finally:
            server.send_signal(signal.SIGINT)  # uvicorn shuts down cleanly and callgrind prints its total
            server.wait(timeout=120)
        log.seek(0)
        return total(log.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    rep = sub.add_parser("repair")
    rep.add_argument("--repo", type=Path, default=HERE)
    rep.add_argument("--kinds", default="chat,responses,messages,gemini")
    chk = sub.add_parser("check")
    chk.add_argument("--repo", type=Path, default=HERE)
    chk.add_argument("--kinds", default="responses,messages,gemini")
    srv = sub.add_parser("serve")
    srv.add_argument("--repo", type=Path, default=HERE)
    srv.add_argument("--upstream", required=True)
    srv.add_argument("--memory", default="memory://", help="a store URL; give each commit a file of its own")
    srv.add_argument("--requests", type=int, default=500, help="requests the second process serves beyond the first one's 50")
    srv.add_argument("--api", choices=sorted(APIS), default="chat", help="which protocol's request to send (JSON, or gemini-stream's events)")
    child = sub.add_parser("_repair")
    child.add_argument("kind")
    child.add_argument("times", type=int)
    checked = sub.add_parser("_check")
    checked.add_argument("kind")
    checked.add_argument("what", choices=("check", "parse"))
    checked.add_argument("times", type=int)
    args = parser.parse_args()
    if args.mode == "_repair":
        _repair_child(args.kind, args.times)
    elif args.mode == "_check":
        _check_child(args.kind, args.what, args.times)
    elif args.mode == "repair":
        repair_counts(args.repo.resolve(), args.kinds.split(","))
    elif args.mode == "check":
        check_counts(args.repo.resolve(), args.kinds.split(","))
    else:
        def count(requests: int) -> int:
            return serve_count(args.repo.resolve(), args.upstream, args.memory, requests, args.api)
        print(f"{per_unit(count, 50, 50 + args.requests) / 1e6:.3f} M instructions per {args.api} request "
              f"({args.repo}, {args.memory})")


if __name__ == "__main__":
    main()
