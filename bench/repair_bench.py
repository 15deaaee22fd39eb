"""Repair engine benchmark: cost of checking a valid history and of repairing a broken one.

Reports microseconds per call and the ratio to ``orjson.loads`` of the same body, measured in the same
run (the baseline every request pays anyway). Targets (issue #2): checking a valid 200-message history
costs no more than parsing it (ratio <= 1.0); repairing a broken 2,000-message history takes < 10 ms.

    python bench/repair_bench.py [--repeat 7]
"""

import argparse
import random
import statistics
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.repair import get_profile, needs_repair, repair  # noqa: E402

TOOLS = ["weather", "time", "search", "read_file"]


def call_id(rng: random.Random) -> str:
    return "call_" + "".join(rng.choices(string.ascii_letters + string.digits, k=24))


def valid_history(size: int, rng: random.Random) -> list[dict]:
    """An agent loop: user, assistant with 1-3 parallel calls, their results, assistant text; repeated."""
    messages: list[dict] = [{"role": "system", "content": "You are a helpful agent. " * 8}]
    while len(messages) < size:
        messages.append({"role": "user", "content": "Please look this up for me: " + "x" * rng.randint(20, 200)})
        calls = [
            {"id": call_id(rng), "type": "function",
             "function": {"name": rng.choice(TOOLS), "arguments": orjson.dumps({"q": "y" * rng.randint(5, 60), "n": rng.randint(1, 9)}).decode()}}
            for _ in range(rng.randint(1, 3))
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "result " + "z" * rng.randint(50, 400)} for c in calls]
        messages.append({"role": "assistant", "content": "Here is what I found: " + "w" * rng.randint(30, 300)})
    return messages[:size]


def broken_history(size: int, rng: random.Random) -> tuple[list[dict], dict]:
    """A valid history broken every way section 2 of docs/provider-rules.md describes, several times each."""
    messages = valid_history(size, rng)
    remembered: dict = {}
    turns = [i for i, m in enumerate(messages) if m.get("tool_calls")]
    for n, index in reversed(list(enumerate(turns))):  # back to front: insertions keep earlier indexes valid
        message = messages[index]
        defect = n % 8
        if defect == 0:  # the framework dropped the calls; the proxy remembers them
            turn = {"tool_calls": message.pop("tool_calls"), "content": None, "reasoning_content": None}
            remembered.update({c["id"]: turn for c in turn["tool_calls"]})
            message["content"] = ""
        elif defect == 1:  # arguments as an object
            message["tool_calls"][0]["function"]["arguments"] = {"q": "object"}
        elif defect == 2:  # missing type
            del message["tool_calls"][0]["type"]
        elif defect == 3:  # truncated arguments
            message["tool_calls"][0]["function"]["arguments"] = '{"q": "trunc'
        elif defect == 4 and index + 1 < len(messages) and messages[index + 1].get("role") == "tool":  # interrupted tool
            del messages[index + 1]
        elif defect == 5 and index + 1 < len(messages) and messages[index + 1].get("role") == "tool":  # injected note
            messages.insert(index + 1, {"role": "user", "content": "Reminder: be brief."})
        elif defect == 6 and index + 1 < len(messages) and messages[index + 1].get("role") == "tool":  # dict content
            messages[index + 1]["content"] = {"value": 42}
        elif defect == 7:  # overlong id
            cid = message["tool_calls"][0]["id"]
            long_id = cid + "_" + "L" * 40
            message["tool_calls"][0]["id"] = long_id
            for m in messages[index + 1 :]:
                if m.get("tool_call_id") == cid:
                    m["tool_call_id"] = long_id
    return messages, remembered


def per_call_us(fn: Callable[[], object], repeat: int, minimum_seconds: float = 0.2) -> float:
    """Median over ``repeat`` rounds of the mean time per call, each round at least ``minimum_seconds``."""
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        if time.perf_counter() - start >= minimum_seconds / 4:
            break
        loops *= 2
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        rounds.append((time.perf_counter() - start) / loops * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(2026)

    valid = {"model": "gpt-4o", "messages": valid_history(200, rng)}
    valid_bytes = orjson.dumps(valid)
    assert not repair(orjson.loads(valid_bytes)).findings, "the valid history must be clean"
    parsed_valid = orjson.loads(valid_bytes)
    parse_valid = per_call_us(lambda: orjson.loads(valid_bytes), args.repeat)
    profile = get_profile("openai")
    check_valid = per_call_us(lambda: needs_repair(parsed_valid, profile), args.repeat)

    broken_messages, remembered = broken_history(2000, rng)
    broken = {"model": "gpt-4o", "messages": broken_messages}
    broken_bytes = orjson.dumps(broken)
    outcome = repair(orjson.loads(broken_bytes), remembered)
    codes: dict[str, int] = {}
    for finding in outcome.findings:
        codes[finding.code] = codes.get(finding.code, 0) + 1
    parsed_broken = orjson.loads(broken_bytes)
    parse_broken = per_call_us(lambda: orjson.loads(broken_bytes), args.repeat)
    fix_broken = per_call_us(lambda: repair(parsed_broken, remembered), args.repeat)

    print(f"valid history:  200 messages, {len(valid_bytes):,} bytes")
    print(f"  orjson.loads          {parse_valid:9.1f} us")
    print(f"  needs_repair (check) {check_valid:9.1f} us   ratio to parse {check_valid / parse_valid:5.2f}  (target <= 1.0)")
    print(f"broken history: 2,000 messages, {len(broken_bytes):,} bytes, {len(outcome.findings)} findings {codes}")
    print(f"  orjson.loads          {parse_broken:9.1f} us")
    print(f"  repair                {fix_broken:9.1f} us   ratio to parse {fix_broken / parse_broken:5.2f}  ({fix_broken / 1000:.2f} ms, target < 10 ms)")


if __name__ == "__main__":
    main()
