#!/usr/bin/env python3
"""The repair of one long tool block with messages between its results: what issue 23 found quadratic.

    python bench/long_block.py                     # this checkout
    python bench/long_block.py --repo /tmp/old     # another checkout (`git worktree add /tmp/old <commit>`)
    python bench/long_block.py --only messages-8000

Each case is a body that needs TM103 (messages between a call turn and its results), repaired as the endpoint
does it (plan, repair, encode) in a fresh Python process, which reports the seconds it took and how much its peak
resident memory grew:

- ``messages-N``: ``/v1/messages``, one assistant message of N ``tool_use`` blocks, then a user message alternating
  ``tool_result`` and text blocks (profile ``anthropic``);
- ``chat-10000``: ``/v1/chat/completions``, 10,000 messages: one turn of 3,332 calls, then each result followed by a
  user message (profile ``openai``);
- ``responses-10000``: ``/v1/responses``, 10,000 items: 3,333 calls, then each output followed by a user message
  (profile ``deepseek``, whose outputs must follow their calls).

A case still running after ``--timeout`` seconds is reported as such. Only the standard library and the checkout's
own dependencies are used.
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = ("messages-2000", "messages-8000", "chat-10000", "responses-10000")


def body(case: str) -> tuple[str, str, dict]:
    """(dialect, profile, body) of a case."""
    kind, size = case.split("-")
    n = int(size)
    if kind == "messages":
        uses = [{"type": "tool_use", "id": f"toolu_{i:06d}", "name": "weather", "input": {}} for i in range(n)]
        answers = [b for i in range(n) for b in ({"type": "tool_result", "tool_use_id": f"toolu_{i:06d}", "content": "ok"},
                                                  {"type": "text", "text": "note"})]
        return "messages", "anthropic", {"model": "m", "max_tokens": 16, "messages": [
            {"role": "user", "content": "go"}, {"role": "assistant", "content": uses}, {"role": "user", "content": answers}]}
    if kind == "chat":
        calls = (n - 2) // 3
        messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i:06d}", "type": "function", "function": {"name": "weather", "arguments": "{}"}} for i in range(calls)]}]
        messages += [m for i in range(calls) for m in ({"role": "tool", "tool_call_id": f"call_{i:06d}", "content": "ok"},
                                                       {"role": "user", "content": "note"})]
        return "chat", "openai", {"model": "m", "messages": messages}
    calls = n // 3
    items: list[dict] = [{"role": "user", "content": "go"}]
    items += [{"type": "function_call", "call_id": f"call_{i:06d}", "name": "weather", "arguments": "{}"} for i in range(calls)]
    items += [m for i in range(calls) for m in ({"type": "function_call_output", "call_id": f"call_{i:06d}", "output": "ok"},
                                                {"role": "user", "content": "note"})]
    return "responses", "deepseek", {"model": "m", "input": items}


def measure(case: str, repo: str) -> dict:
    """Run in the child: repair the case with the checkout at ``repo``."""
    sys.path.insert(0, repo)
    import orjson

    from proxy.dialects import DIALECTS
    from proxy.repair import Policy

    name, profile, made = body(case)
    dialect = next(d for d in DIALECTS if d.name == name)
    raw = orjson.dumps(made)
    parsed = orjson.loads(raw)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    planned = dialect.plan(parsed, dialect.profile(profile))
    result = planned.repair({}, Policy())
    sent = orjson.dumps(result.body)
    seconds = time.perf_counter() - started
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    return {"case": case, "body_mb": len(raw) / 1e6, "seconds": seconds, "peak_mb": grown / 1024, "findings": len(result.findings),
            "detail_chars": sum(len(f.detail) for f in result.findings), "sent_mb": len(sent) / 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=str(REPO), help="checkout of toolmend to measure (default: this one)")
    parser.add_argument("--only", default=",".join(CASES), help=f"cases, comma-separated (default: {','.join(CASES)})")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a case may run (default 300)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.repo)))
        return 0
    print(f"{'case':16} {'body MB':>8} {'seconds':>9} {'peak +MB':>9} {'findings':>9} {'detail chars':>13}")
    for case in args.only.split(","):
        try:
            done = subprocess.run([sys.executable, __file__, "--one", case, "--repo", args.repo], capture_output=True, text=True,
                                  timeout=args.timeout, check=True)
        except subprocess.TimeoutExpired:
            print(f"{case:16} still running after {args.timeout:.0f} s")
            continue
        row = json.loads(done.stdout)
        print(f"{case:16} {row['body_mb']:8.2f} {row['seconds']:9.2f} {row['peak_mb']:9.0f} {row['findings']:9,} {row['detail_chars']:13,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
