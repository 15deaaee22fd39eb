"""Repair engine benchmark: cost of checking a valid history and of repairing a broken one.

Reports microseconds per call and the ratio to ``orjson.loads`` of the same body, measured in the same
run (the baseline every request pays anyway). Targets (issue #2): checking a valid 200-message history
costs no more than parsing it (ratio <= 1.0); repairing a broken 2,000-message history takes < 10 ms.
The same for the Responses API (``POST /v1/responses``): the clean check of a valid 2,000-item input
(reasoning, parallel function and custom calls with server ids, outputs, messages) and the repair of a
broken one, with what the proxy would have remembered of the answers; and for Anthropic Messages
(``POST /v1/messages``): a valid 2,000-message history (signed thinking, text, parallel ``tool_use``,
``tool_result`` blocks) and a broken one; and for Gemini's native API (``generateContent``): a valid 2,000-content
Gemini 3 history (thought parts, signed parallel ``functionCall`` parts with ids, ``functionResponse`` contents) and a
broken one.

Each line is measured as the endpoint runs it: on a body over ``LARGE_BODY_BYTES`` (all but the valid chat
history) the parse runs with the cycle collector paused (``collector_paused``), the check and the repair with the
heap frozen for it (``heap_frozen``).

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

from proxy.dialects import GEMINI, MESSAGES, RESPONSES  # noqa: E402
from proxy.dialects.dialect import Dialect  # noqa: E402
from proxy.dialects.gemini.capture import turns_from_json as gemini_turns  # noqa: E402
from proxy.dialects.messages.capture import turns_from_json as message_turns  # noqa: E402
from proxy.dialects.responses.capture import turns_from_json  # noqa: E402
from proxy.endpoint import LARGE_BODY_BYTES, collector_paused, heap_frozen  # noqa: E402
from proxy.dialects.chat.plan import needs_repair, repair  # noqa: E402
from proxy.dialects.chat.profiles import get_profile  # noqa: E402
from proxy.repair import Policy  # noqa: E402
from proxy.turns import Turn  # noqa: E402

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


def item_id(prefix: str, rng: random.Random) -> str:
    return prefix + "".join(rng.choices("0123456789abcdef", k=50))


def reasoning(rng: random.Random) -> dict:
    return {"id": item_id("rs_", rng), "type": "reasoning", "summary": [], "encrypted_content": "gAAAAA" + "e" * rng.randint(200, 600)}


def valid_items(size: int, rng: random.Random) -> tuple[list[dict], list[list[dict]]]:
    """A stored reasoning-model agent loop as the client replays it (every item with its server id): user, a
    response of reasoning and 1-3 parallel calls (function calls first, then custom ones), their outputs,
    a response of reasoning and a message; repeated while whole episodes fit, then user messages up to ``size``.
    Also each response with calls as the server sent it."""
    items: list[dict] = [{"role": "developer", "content": "You are a helpful agent. " * 8}]
    answers: list[list[dict]] = []
    while True:
        calls = []
        for n in range(rng.randint(1, 3)):
            if n and rng.random() < 0.3:
                calls.append({"id": item_id("ctc_", rng), "type": "custom_tool_call", "status": "completed", "call_id": call_id(rng),
                              "name": "apply_patch", "input": "*** Begin Patch\n" + "p" * rng.randint(20, 200)})
            else:
                calls.append({"id": item_id("fc_", rng), "type": "function_call", "status": "completed", "call_id": call_id(rng),
                              "name": rng.choice(TOOLS), "arguments": orjson.dumps({"q": "y" * rng.randint(5, 60), "n": rng.randint(1, 9)}).decode()})
        answer = [reasoning(rng), *calls]
        outputs = [{"type": "custom_tool_call_output" if c["type"] == "custom_tool_call" else "function_call_output", "call_id": c["call_id"],
                    "output": "result " + "z" * rng.randint(50, 400)} for c in calls]
        message = {"id": item_id("msg_", rng), "type": "message", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "annotations": [], "text": "Here is what I found: " + "w" * rng.randint(30, 300)}]}
        episode = [{"role": "user", "content": "Please look this up for me: " + "x" * rng.randint(20, 200)}, *answer, *outputs, reasoning(rng), message]
        if len(items) + len(episode) > size:
            break
        answers.append(answer)
        items += episode
    items += [{"role": "user", "content": f"And {n}?"} for n in range(size - len(items))]
    return items, answers


def broken_items(size: int, rng: random.Random) -> tuple[list[dict], dict[str, Turn]]:
    """A valid Responses input broken the catalogue's ways, several times each, and what the proxy remembered."""
    items, answers = valid_items(size, rng)
    remembered: dict[str, Turn] = {}
    for n, answer in reversed(list(enumerate(answers))):  # back to front: edits keep earlier positions valid
        start = items.index(answer[0])
        end = start + len(answer)
        defect = n % 6
        if defect == 0:  # the client dropped the reasoning and the calls; the proxy remembers them
            for turn in turns_from_json(orjson.dumps({"object": "response", "id": item_id("resp_", rng), "output": answer})):
                remembered.update(dict.fromkeys(turn.get("ids", []), turn))
            del items[start:end]
        elif defect == 1 and end < len(items):  # an interrupted tool: its output lost
            del items[end]
        elif defect == 2:  # the same reasoning item twice (RS-9)
            items.insert(start, dict(items[start]))
        elif defect == 3:  # a gateway's id on a call (RS-12)
            items[start + 1] = {**items[start + 1], "id": "item_" + items[start + 1]["id"][3:]}
        elif defect == 4 and end < len(items):  # a hook's note between the calls and their outputs
            items.insert(end, {"role": "developer", "content": "Reminder: be brief."})
        elif defect == 5 and end < len(items):  # an output stored before its call
            items.insert(start, items.pop(end))
    items.append(reasoning(rng))  # a response cut off after its reasoning (RS-6)
    return items, remembered


def as_served(body: bytes, fn: Callable[[], object]) -> Callable[[], object]:
    """``fn``, a check or a repair, as the endpoint runs it on ``body``: with the heap frozen when the body is large."""
    return fn if len(body) <= LARGE_BODY_BYTES else lambda: heap_frozen(fn)


def parse_as_served(body: bytes) -> Callable[[], object]:
    """The endpoint's parse of ``body``: with the cycle collector paused when the body is large."""
    return (lambda: orjson.loads(body)) if len(body) <= LARGE_BODY_BYTES else lambda: collector_paused(orjson.loads, body)


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
    parse_valid = per_call_us(parse_as_served(valid_bytes), args.repeat)
    profile = get_profile("openai")
    check_valid = per_call_us(as_served(valid_bytes, lambda: needs_repair(parsed_valid, profile)), args.repeat)

    broken_messages, remembered = broken_history(2000, rng)
    broken = {"model": "gpt-4o", "messages": broken_messages}
    broken_bytes = orjson.dumps(broken)
    outcome = repair(orjson.loads(broken_bytes), remembered)
    codes: dict[str, int] = {}
    for finding in outcome.findings:
        codes[finding.code] = codes.get(finding.code, 0) + 1
    parsed_broken = orjson.loads(broken_bytes)
    parse_broken = per_call_us(parse_as_served(broken_bytes), args.repeat)
    fix_broken = per_call_us(as_served(broken_bytes, lambda: repair(parsed_broken, remembered)), args.repeat)

    print(f"valid history:  200 messages, {len(valid_bytes):,} bytes")
    print(f"  orjson.loads          {parse_valid:9.1f} us")
    print(f"  needs_repair (check) {check_valid:9.1f} us   ratio to parse {check_valid / parse_valid:5.2f}  (target <= 1.0)")
    print(f"broken history: 2,000 messages, {len(broken_bytes):,} bytes, {len(outcome.findings)} findings {codes}")
    print(f"  orjson.loads          {parse_broken:9.1f} us")
    print(f"  repair                {fix_broken:9.1f} us   ratio to parse {fix_broken / parse_broken:5.2f}  ({fix_broken / 1000:.2f} ms, target < 10 ms)")
    responses(rng, args.repeat)
    messages(rng, args.repeat)
    gemini(rng, args.repeat)


def responses(rng: random.Random, repeat: int) -> None:
    """The Responses API lines: the clean check of a valid input, the repair of a broken one."""
    valid = {"model": "gpt-5.5", "input": valid_items(2000, rng)[0]}
    items, remembered = broken_items(2000, rng)
    dialect_lines(RESPONSES, "Responses input", valid, {"model": "gpt-5.5", "input": items}, remembered, repeat)


def tool_use(rng: random.Random) -> dict:
    return {"type": "tool_use", "id": "toolu_" + "".join(rng.choices(string.ascii_letters + string.digits, k=24)),
            "name": rng.choice(TOOLS), "input": {"q": "y" * rng.randint(5, 60), "n": rng.randint(1, 9)}}


def valid_messages(size: int, rng: random.Random) -> tuple[list[dict], list[dict]]:
    """A Claude agent loop with thinking: user, an assistant message (signed thinking, text, 1-3 parallel
    ``tool_use``), the results first in the next user message, a text answer; repeated up to ``size`` messages.
    Also each assistant message with calls as the server sent it."""
    messages: list[dict] = []
    answers: list[dict] = []
    while len(messages) + 4 <= size:
        calls = [tool_use(rng) for _ in range(rng.randint(1, 3))]
        thinking = {"type": "thinking", "thinking": "Let me think. " * rng.randint(3, 30), "signature": "Eu" + "s" * rng.randint(200, 400)}
        answer = {"role": "assistant", "content": [thinking, {"type": "text", "text": "Checking."}, *calls]}
        results = [{"type": "tool_result", "tool_use_id": call["id"], "content": "result " + "z" * rng.randint(50, 400)} for call in calls]
        messages += [{"role": "user", "content": "Please look this up: " + "x" * rng.randint(20, 200)}, answer,
                     {"role": "user", "content": results}, {"role": "assistant", "content": [{"type": "text", "text": "Found: " + "w" * rng.randint(30, 300)}]}]
        answers.append(answer)
    messages += [{"role": "user", "content": f"And {n}?"} for n in range(size - len(messages))]
    return messages, answers


def broken_messages(size: int, rng: random.Random) -> tuple[list[dict], dict[str, Turn]]:
    """A valid Messages history broken the catalogue's ways, several times each, and what the proxy remembered."""
    messages, answers = valid_messages(size, rng)
    remembered: dict[str, Turn] = {}
    for n, answer in enumerate(answers):
        at = messages.index(answer)
        defect = n % 5
        if defect == 0:  # the client kept only the text: tool_use and thinking dropped (AM-4); the proxy remembers them
            for turn in message_turns(orjson.dumps({"type": "message", "id": f"msg_{n}", "role": "assistant", "content": answer["content"]})):
                remembered.update(dict.fromkeys(turn.get("ids", []), turn))
            messages[at] = {"role": "assistant", "content": [{"type": "text", "text": "Checking."}]}
        elif defect == 1:  # an interrupted tool: its result lost (AM-1)
            messages[at + 1] = {"role": "user", "content": messages[at + 1]["content"][1:] or "Never mind."}
        elif defect == 2:  # text before the results (AM-2)
            messages[at + 1] = {"role": "user", "content": [{"type": "text", "text": "Here:"}, *messages[at + 1]["content"]]}
        elif defect == 3:  # an id from another provider (AM-7), in the call and its result
            calls = [dict(block) for block in answer["content"]]
            calls[2]["id"] = "functions.weather:" + str(n)
            results = [dict(block) for block in messages[at + 1]["content"]]
            results[0]["tool_use_id"] = calls[2]["id"]
            messages[at], messages[at + 1] = {"role": "assistant", "content": calls}, {"role": "user", "content": results}
        elif defect == 4:  # an empty text block (AM-17)
            messages[at + 2] = {"role": "assistant", "content": [{"type": "text", "text": ""}, *messages[at + 2]["content"]]}
    return messages, remembered


def messages(rng: random.Random, repeat: int) -> None:
    """The Anthropic Messages lines: the clean check of a valid history, the repair of a broken one."""
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 4096}
    valid = {"model": "claude-sonnet-4-5", **thinking, "messages": valid_messages(2000, rng)[0]}
    history, remembered = broken_messages(2000, rng)
    dialect_lines(MESSAGES, "Messages history", valid, {"model": "claude-sonnet-4-5", **thinking, "messages": history}, remembered, repeat)


def signature(rng: random.Random) -> str:
    return "Cq" + "".join(rng.choices(string.ascii_letters + string.digits, k=rng.randint(200, 400))) + "=="


def gemini_call(rng: random.Random) -> dict:
    return {"functionCall": {"id": "".join(rng.choices(string.ascii_lowercase + string.digits, k=16)), "name": rng.choice(TOOLS),
                             "args": {"q": "y" * rng.randint(5, 60), "n": rng.randint(1, 9)}}}


def valid_contents(size: int, rng: random.Random) -> tuple[list[dict], list[dict]]:
    """A Gemini 3 agent loop as google-genai replays it: user text, a model content (a thought summary, then 1-3
    parallel calls with ids, the first one signed), one user content with their responses in call order, a model text
    answer; repeated up to ``size`` contents. Also each model content with calls as the server sent it."""
    contents: list[dict] = []
    answers: list[dict] = []
    while len(contents) + 4 <= size:
        calls = [gemini_call(rng) for _ in range(rng.randint(1, 3))]
        calls[0]["thoughtSignature"] = signature(rng)
        answer = {"role": "model", "parts": [{"text": "Let me check. " * rng.randint(3, 30), "thought": True}, *calls]}
        responses = [{"functionResponse": {"id": call["functionCall"]["id"], "name": call["functionCall"]["name"],
                                           "response": {"result": "z" * rng.randint(50, 400)}}} for call in calls]
        contents += [{"role": "user", "parts": [{"text": "Please look this up: " + "x" * rng.randint(20, 200)}]}, answer,
                     {"role": "user", "parts": responses}, {"role": "model", "parts": [{"text": "Found: " + "w" * rng.randint(30, 300)}]}]
        answers.append(answer)
    contents += [{"role": "user", "parts": [{"text": f"And {n}?"}]} for n in range(size - len(contents))]
    return contents, answers


def broken_contents(size: int, rng: random.Random) -> tuple[list[dict], dict[str, Turn]]:
    """A valid Gemini history broken the catalogue's ways, several times each, and what the proxy remembered. The last
    episode is the current turn, ending with its responses: its calls come back without their signatures (GN-11),
    which memory holds."""
    contents, answers = valid_contents(size, rng)
    remembered: dict[str, Turn] = {}

    def remember(answer: dict) -> None:
        for turn in gemini_turns(orjson.dumps({"candidates": [{"content": answer, "index": 0}]})):
            remembered.update(dict.fromkeys(turn.get("ids", []), turn))

    last = answers.pop()  # the current turn: its calls sent back without their signatures (GN-11), its answer not yet
    remember(last)
    at = contents.index(last)
    contents[at] = {"role": "model", "parts": [{k: v for k, v in part.items() if k != "thoughtSignature"} for part in last["parts"]]}
    del contents[at + 2:]
    for n, answer in reversed(list(enumerate(answers))):  # back to front: insertions keep earlier positions valid
        at = contents.index(answer)
        responses = contents[at + 1]["parts"]
        defect = n % 7
        if defect == 0:  # the client dropped the model content; its responses are orphans (GN-1/GN-2); memory holds it
            remember(answer)
            del contents[at]
        elif defect == 1:  # an interrupted tool: its response lost (GN-1)
            contents[at + 1] = {"role": "user", "parts": responses[1:] or [{"text": "Never mind."}]}
        elif defect == 2:  # each response in a content of its own (GN-1), as some SDK loops send them
            contents[at + 1:at + 2] = [{"role": "user", "parts": [response]} for response in responses]
        elif defect == 3:  # a response under a name a bridge made up (GN-7)
            first = responses[0]["functionResponse"]
            contents[at + 1] = {"role": "user", "parts": [{"functionResponse": {**first, "name": "tool"}}, *responses[1:]]}
        elif defect == 4:  # an empty text part (GN-10)
            contents[at + 2] = {"role": "model", "parts": [{"text": ""}, *contents[at + 2]["parts"]]}
        elif defect == 5:  # the thought summary sent as a model content of its own before the calls (GN-3)
            contents[at:at + 1] = [{"role": "model", "parts": answer["parts"][:1]}, {"role": "model", "parts": answer["parts"][1:]}]
        elif defect == 6:  # the responses under the legacy role "function" (GN-5)
            contents[at + 1] = {"role": "function", "parts": responses}
    return contents, remembered


def gemini(rng: random.Random, repeat: int) -> None:
    """The Gemini lines (``generateContent`` of a Gemini 3 model): the clean check of a valid history, the repair of a
    broken one."""
    valid = {"model": "gemini-3-pro-preview", "contents": valid_contents(2000, rng)[0]}
    history, remembered = broken_contents(2000, rng)
    dialect_lines(GEMINI, "Gemini contents", valid, {"model": "gemini-3-pro-preview", "contents": history}, remembered, repeat)


#: The profile each dialect's lines are measured with.
PROFILES = {"responses": "openai", "messages": "anthropic", "gemini": "gemini"}


def dialect_lines(dialect: Dialect, label: str, valid: dict, broken: dict, remembered: dict[str, Turn], repeat: int) -> None:
    """A dialect's two lines: plan (the clean check) of ``valid`` and plan + repair of ``broken`` with what the store
    would answer for the plan's ids, each against ``orjson.loads`` of the same body in the same run."""
    profile, policy = dialect.profile(PROFILES[dialect.name]), Policy()
    valid_bytes = orjson.dumps(valid)
    parsed_valid = orjson.loads(valid_bytes)
    assert dialect.plan(parsed_valid, profile) is None, "the valid history must need no plan"
    parse_valid = per_call_us(parse_as_served(valid_bytes), repeat)
    check_valid = per_call_us(as_served(valid_bytes, lambda: dialect.plan(parsed_valid, profile)), repeat)

    broken_bytes = orjson.dumps(broken)
    parsed_broken = orjson.loads(broken_bytes)
    planned = dialect.plan(parsed_broken, profile)
    assert planned is not None
    recalled = {key: remembered[key] for key in planned.recall if key in remembered}  # what the store answers

    def plan_and_repair() -> object:
        plan = dialect.plan(parsed_broken, profile)
        assert plan is not None
        return plan.repair(recalled, policy)

    outcome = planned.repair(recalled, policy)
    assert outcome.rejected is None, outcome.rejected
    assert orjson.loads(broken_bytes) == parsed_broken, "the repair must not change its input"
    codes: dict[str, int] = {}
    for finding in outcome.findings:
        codes[finding.code] = codes.get(finding.code, 0) + 1
    parse_broken = per_call_us(parse_as_served(broken_bytes), repeat)
    fix_broken = per_call_us(as_served(broken_bytes, plan_and_repair), repeat)

    key = dialect.history_key
    print(f"valid {label}:  {len(valid[key]):,} entries, {len(valid_bytes):,} bytes")
    print(f"  orjson.loads          {parse_valid:9.1f} us")
    print(f"  plan (clean check)    {check_valid:9.1f} us   ratio to parse {check_valid / parse_valid:5.2f}  (target <= 1.0)")
    print(f"broken {label}: {len(broken[key]):,} entries, {len(broken_bytes):,} bytes, {len(outcome.findings)} findings {codes}")
    print(f"  orjson.loads          {parse_broken:9.1f} us")
    print(f"  plan + repair         {fix_broken:9.1f} us   ratio to parse {fix_broken / parse_broken:5.2f}  ({fix_broken / 1000:.2f} ms, target < 10 ms)")


if __name__ == "__main__":
    main()
