"""A repair costs work linear in the body, and stops when its client has gone (issue 23).

A history twice as long costs about twice the work, never four times. Work is counted, never timed: the Python
lines the check and the repair run (``sys.settrace``) and the peak of what they allocate (``tracemalloc``); for the
rules that used to edit the history in place, the messages moved within the list. Each history is one that made a
rule quadratic: twice as long, it cost four times as much. A cancelled repair is shown stopped by the rules it did
not run, in an order of events, never by a clock.
"""

import asyncio
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterable
from typing import Any, SupportsIndex

import anyio
import orjson
import pytest
import respx

from proxy import endpoint
from proxy.dialects import GEMINI, MESSAGES, RESPONSES
from proxy.dialects.capture import MAX_ENTRIES
from proxy.dialects.chat import CHAT
from proxy.dialects.chat.profiles import get_profile
from proxy.dialects.chat.rules import empty_assistant_message, malformed_message, mistral_role_bridge, tool_image_parts
from proxy.dialects.dialect import Dialect
from proxy.repair import Policy
from proxy.repair.cancel import Cancel, Cancelled
from proxy.repair.context import Context
from proxy.repair.findings import DETAIL_CHARS, DETAIL_NAMES, listed, shown
from proxy.repair.rule import RepairRule
from proxy.repair.rules import duplicate_tool_result, split_parallel_turn, unanswered_tool_call
from proxy.turns import Turn
from tests.support.gemini_shapes import SHAPES as GEMINI_SHAPES
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import AUTH, UPSTREAM, AsgiCall, call_asgi, running_proxy

#: Twice the history may cost at most this much more work: linear with some slack (a list or dict that grows
#: doubles its storage), where quadratic work grows four times.
RATIO = 2.5
SIZE = 400  # the smaller history's size (calls, results...); the larger one is twice it
#: The larger size of a remembered turn's blocks: a turn keeps at most MAX_ENTRIES, its call included.
REMEMBERED = MAX_ENTRIES - 1


def calls(n: int, name: Callable[[int], str] = lambda i: "weather") -> list[dict[str, Any]]:
    return [{"id": f"call_{i:06d}", "type": "function", "function": {"name": name(i), "arguments": "{}"}} for i in range(n)]


def result(i: int, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{i:06d}", "content": content}


def note(text: str = "note") -> dict[str, Any]:
    return {"role": "user", "content": text}


def chat_interleaved(n: int) -> dict[str, Any]:
    """The issue's chat case: one turn of n calls, each result followed by a user message (TM103)."""
    return {"messages": [note(), {"role": "assistant", "content": None, "tool_calls": calls(n)},
                         *(m for i in range(n) for m in (result(i), note()))]}


def messages_interleaved(n: int) -> dict[str, Any]:
    """The issue's Messages case: an assistant message of n ``tool_use`` blocks, then a user message alternating
    ``tool_result`` and text blocks (TM103)."""
    uses = [{"type": "tool_use", "id": f"toolu_{i:06d}", "name": "weather", "input": {}} for i in range(n)]
    answers = [b for i in range(n) for b in ({"type": "tool_result", "tool_use_id": f"toolu_{i:06d}", "content": "ok"},
                                              {"type": "text", "text": "note"})]
    return {"max_tokens": 16, "messages": [note(), {"role": "assistant", "content": uses}, {"role": "user", "content": answers}]}


def responses_interleaved(n: int) -> dict[str, Any]:
    """The issue's Responses case (deepseek: outputs must follow their calls): n calls, then outputs and messages
    alternating (TM103)."""
    return {"input": [note(), *({"type": "function_call", "call_id": f"call_{i:06d}", "name": "weather", "arguments": "{}"} for i in range(n)),
                      *(m for i in range(n) for m in ({"type": "function_call_output", "call_id": f"call_{i:06d}", "output": "ok"}, note()))]}


def same_id_declared(n: int) -> dict[str, Any]:
    """One call id declared n times (TM107 tried every earlier rename for each)."""
    return {"messages": [note(), *(m for _ in range(n) for m in ({"role": "assistant", "content": None, "tool_calls": calls(1)}, result(0)))]}


def nameless_results(n: int) -> dict[str, Any]:
    """n results without ids, each named after one of n unanswered calls (TM106 searched every call for each)."""
    return {"messages": [note(), {"role": "assistant", "content": None, "tool_calls": calls(n, lambda i: f"tool{i}")},
                         *({"role": "tool", "name": f"tool{i}", "content": "ok"} for i in range(n))]}


def unmatched_function_messages(n: int) -> dict[str, Any]:
    """n legacy calls, then n function messages of a name none has (TM207 searched every waiting call for each)."""
    return {"messages": [note(), *({"role": "assistant", "content": None, "function_call": {"name": f"f{i}", "arguments": "{}"}} for i in range(n)),
                         *({"role": "function", "name": "other", "content": "ok"} for _ in range(n))]}


def media_results(n: int) -> dict[str, Any]:
    """n results of one call, each a different image (TM108 looked through every part merged so far for each)."""
    images = ([{"type": "image_url", "image_url": {"url": f"https://example.com/{i}.png"}}] for i in range(n))
    return {"messages": [note(), {"role": "assistant", "content": None, "tool_calls": calls(1)}, *(result(0, image) for image in images)]}


def responses_reasoned(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n calls with server ids, their reasoning left out, all of one remembered response (TM405 read the whole
    response for each call)."""
    items = [{"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i:06d}", "name": "weather", "arguments": "{}"} for i in range(n)]
    remembered: Turn = {"dialect": "responses", "items": [{"type": "reasoning", "id": "rs_1", "summary": []}, *items]}
    body = {"input": [note(), *items, *({"type": "function_call_output", "call_id": f"call_{i:06d}", "output": "ok"} for i in range(n))]}
    return body, {f"call_{i:06d}": remembered for i in range(n)}


def gemini_unsigned(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n calls whose signatures the client dropped, all of one remembered turn (TM307 searched the turn for each)."""
    turn: Turn = {"tool_calls": [{**call, "extra_content": {"google": {"thought_signature": "c2ln"}}} for call in calls(n)]}
    body = {"messages": [note(), {"role": "assistant", "content": None, "tool_calls": calls(n)}, *(result(i) for i in range(n))]}
    return body, {call["id"]: turn for call in calls(n)}


def openrouter_steps(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n steps of the current turn, each a call turn whose reasoning_details the client dropped (TM312)."""
    details = [{"type": "reasoning.encrypted", "data": "c2ln", "format": "google-gemini-v1", "index": 0}]
    steps = [m for i, call in enumerate(calls(n)) for m in ({"role": "assistant", "content": None, "tool_calls": [call]}, result(i))]
    return ({"model": "google/gemini-3-pro-preview", "messages": [note(), *steps]},
            {call["id"]: {"tool_calls": [call], "reasoning_details": details} for call in calls(n)})


def messages_remembered(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """An assistant message of n text blocks whose ``tool_use`` the client dropped, remembered with n text blocks of
    its own (the view compared each remembered block with every block the client kept)."""
    texts = [{"type": "text", "text": f"step {i}"} for i in range(n)]
    use = {"type": "tool_use", "id": "toolu_000001", "name": "weather", "input": {}}
    remembered: Turn = {"dialect": "messages", "ids": ["toolu_000001"], "message_id": "msg_1",
                        "blocks": [*({"type": "text", "text": f"remembered {i}"} for i in range(n)), use]}
    body = {"max_tokens": 16, "messages": [note(), {"role": "assistant", "content": texts},
                                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_000001", "content": "ok"}]}]}
    return body, {"toolu_000001": remembered}


def altered_thinking_of_many_calls(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """The latest assistant message: signed thinking the client altered and n calls, all of one remembered turn
    (TM516 read the whole turn again for each call)."""
    uses = [{"type": "tool_use", "id": f"toolu_{i:06d}", "name": "weather", "input": {}} for i in range(n)]
    original = {"type": "thinking", "thinking": "Check  the weather.", "signature": "c2ln"}
    remembered: Turn = {"dialect": "messages", "ids": [use["id"] for use in uses], "message_id": "msg_1", "blocks": [original, *uses]}
    body = {"max_tokens": 16, "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": [
        note(), {"role": "assistant", "content": [{**original, "thinking": "Check the weather."}, *uses]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "ok"} for use in uses]}]}
    return body, dict.fromkeys(remembered["ids"], remembered)


def orphans_of_a_stranger_turn(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n orphan results whose ids memory answers with a turn of n calls holding none of them (TM101 listed the turn's
    ids again for each)."""
    turn: Turn = {"tool_calls": [{**call, "id": f"other_{i}"} for i, call in enumerate(calls(n))]}
    return {"messages": [note(), *(result(i) for i in range(n))]}, {call["id"]: turn for call in calls(n)}


def turns_merged_by_the_client(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n remembered turns of two calls each; the client kept one call of each, all in one assistant message, and only
    the results of the others (TM101 copied and read that message whole for each turn it gave back)."""
    kept = [{**call, "id": f"kept_{i}"} for i, call in enumerate(calls(n))]
    turns: list[Turn] = [{"tool_calls": [call, kept[i]]} for i, call in enumerate(calls(n))]
    body = {"messages": [note(), {"role": "assistant", "content": None, "tool_calls": kept},
                         *({**result(i), "tool_call_id": f"kept_{i}"} for i in range(n)), *(result(i) for i in range(n))]}
    return body, {call["id"]: turns[i] for i, call in enumerate(calls(n))}


Case = tuple[Dialect, str, Callable[[int], Any]]

CASES: dict[str, Case] = {
    "chat interleaved (TM103)": (CHAT, "openai", chat_interleaved),
    "messages interleaved (TM103)": (MESSAGES, "anthropic", messages_interleaved),
    "responses interleaved, deepseek (TM103)": (RESPONSES, "deepseek", responses_interleaved),
    "one id declared again and again (TM107)": (CHAT, "openai", same_id_declared),
    "results named, without ids (TM106)": (CHAT, "openai", nameless_results),
    "function messages of no waiting name (TM207)": (CHAT, "openai", unmatched_function_messages),
    "media results of one call (TM108)": (CHAT, "openai", media_results),
    "calls of one remembered response (TM405)": (RESPONSES, "openai", responses_reasoned),
    "calls of one remembered gemini turn (TM307)": (CHAT, "gemini", gemini_unsigned),
    "steps of the current turn without their lists (TM312)": (CHAT, "openrouter", openrouter_steps),
    "a long message with its long remembered turn (TM101, Messages)": (MESSAGES, "anthropic", lambda n: messages_remembered(n * REMEMBERED // (2 * SIZE))),
    "altered thinking of a message of many calls of one turn (TM516)": (MESSAGES, "anthropic",
                                                                        lambda n: altered_thinking_of_many_calls(n * REMEMBERED // (2 * SIZE))),
    "orphans answered by a turn that holds none of them (TM101)": (CHAT, "openai", orphans_of_a_stranger_turn),
    "turns the client merged into one message (TM101)": (CHAT, "openai", turns_merged_by_the_client),
    **{f"gemini: {name}": (GEMINI, "gemini", make) for name, make in GEMINI_SHAPES.items()},
}


class Compared(dict):
    """A block that counts how often it is compared with another."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        Compared.compared += 1
        return dict.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]  # as dict's


def test_remembered_blocks_are_not_compared_with_every_block_kept() -> None:
    """The blocks a remembered Messages turn brings back give way to equal ones the client kept, found by lookup, not
    compared with each of them."""
    counts = []
    for size in (REMEMBERED // 2, REMEMBERED):
        body, recalled = messages_remembered(size)
        kept = body["messages"][1]
        kept["content"] = [Compared(block) for block in kept["content"]]
        Compared.compared = 0
        planned = MESSAGES.plan(body, MESSAGES.profile("anthropic"))
        assert planned is not None
        written = planned.repair(recalled, Policy()).body["messages"][1]["content"]
        assert len(written) == 2 * size + 1  # the client's texts, the remembered ones, the call
        counts.append(Compared.compared)
    assert counts[1] <= RATIO * counts[0], f"compared {counts[0]} times, then {counts[1]}"


def repair_of(case: Case, size: int) -> Callable[[], Any]:
    """What the endpoint does with the body (plan, repair, encode), ready to be counted."""
    dialect, profile_name, make = case
    made = make(size)
    body, recalled = made if type(made) is tuple else (made, {})
    parsed = orjson.loads(orjson.dumps({"model": "m", **body}))
    profile = dialect.profile(profile_name)

    def repair() -> Any:
        planned = dialect.plan(parsed, profile)
        assert planned is not None
        result = planned.repair(recalled, Policy())
        assert result.changed
        return orjson.dumps(result.body), result.findings

    return repair


def lines_run(action: Callable[[], Any]) -> int:
    """How many Python lines ``action`` runs."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        action()
    finally:
        sys.settrace(None)
    return count


def peak_allocated(action: Callable[[], Any]) -> int:
    """The most memory ``action`` held at once, in bytes (what it returns included)."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", CASES)
def test_twice_the_history_costs_about_twice_the_lines(name: str) -> None:
    small, large = (lines_run(repair_of(CASES[name], size)) for size in (SIZE, 2 * SIZE))
    assert large <= RATIO * small, f"{name}: {small} lines, then {large}"


@pytest.mark.parametrize("name", CASES)
def test_twice_the_history_costs_about_twice_the_memory(name: str) -> None:
    small, large = (peak_allocated(repair_of(CASES[name], size)) for size in (SIZE, 2 * SIZE))
    assert large <= RATIO * small, f"{name}: {small} bytes at most, then {large}"


@pytest.mark.parametrize("name", ["chat interleaved (TM103)", "messages interleaved (TM103)", "responses interleaved, deepseek (TM103)"])
def test_a_finding_names_a_few_ids_of_a_long_block(name: str) -> None:
    _, findings = repair_of(CASES[name], 2 * SIZE)()
    moved = [finding for finding in findings if finding.code == "TM103"]
    assert len(moved) == 2 * SIZE - 1  # one per message moved: what the headers and metrics count
    assert moved[0].detail.endswith(f"and {2 * SIZE - DETAIL_NAMES} more")
    assert all(len(finding.detail) <= 120 for finding in moved)


def test_listed_names_the_first_few_and_counts_the_rest() -> None:
    assert listed(["a", "b"]) == "a, b"
    assert listed([f"id{n}" for n in range(DETAIL_NAMES + 4)]) == ", ".join(f"id{n}" for n in range(DETAIL_NAMES)) + " and 4 more"
    assert shown("x" * 1000).endswith("... (1000 characters)") and len(shown("x" * 1000)) < 100


def test_a_finding_keeps_a_bounded_detail_whatever_the_rule_wrote() -> None:
    huge = "c" * 100_000  # a client's call id: TM107 names it in the detail of every rename
    body = {"messages": [note(), *(m for _ in range(3) for m in ({"role": "assistant", "content": None,
                                                                 "tool_calls": [{**calls(1)[0], "id": huge}]}, {**result(0), "tool_call_id": huge}))]}
    planned = CHAT.plan(body, get_profile("openai"))
    assert planned is not None
    findings = planned.repair({}, Policy()).findings
    assert findings and all(len(finding.detail) <= DETAIL_CHARS + 3 for finding in findings)


class Moves(list):
    """A list that counts the elements its edits move: what ``del`` and ``insert`` shift, what a slice assignment
    writes."""

    moved = 0

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        Moves.moved += len(self) - (index.__index__() if not isinstance(index, slice) else 0)
        super().__delitem__(index)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        Moves.moved += len(self) - index.__index__()
        super().insert(index, value)

    def __setitem__(self, index: Any, value: Any) -> None:
        Moves.moved += len(value) if isinstance(index, slice) else 1
        super().__setitem__(index, value)


def moves(rule: RepairRule, messages: Iterable[dict[str, Any]], profile: str = "openai") -> int:
    Moves.moved = 0
    ctx = Context(Moves(orjson.loads(orjson.dumps(list(messages)))), {}, Policy(), get_profile(profile))
    rule.apply(ctx)
    assert ctx.findings
    return Moves.moved


def split_turns(n: int) -> list[dict[str, Any]]:
    return [note(), *({"role": "assistant", "content": f"part {i}", "tool_calls": [call]} for i, call in enumerate(calls(n))), *(result(i) for i in range(n))]


def empty_assistants(n: int) -> list[dict[str, Any]]:
    return [note(), *({"role": "assistant", "content": ""} for _ in range(n))]


def repeated_results(n: int) -> list[dict[str, Any]]:
    return [note(), {"role": "assistant", "content": None, "tool_calls": calls(1)}, *(result(0, f"result {i}") for i in range(n))]


def media_blocks(n: int) -> list[dict[str, Any]]:
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    return [note(), *(m for i, call in enumerate(calls(n)) for m in ({"role": "assistant", "content": None, "tool_calls": [call]}, result(i, image)))]


def bridged(n: int) -> list[dict[str, Any]]:
    return [note(), *(m for i, call in enumerate(calls(n)) for m in ({"role": "assistant", "content": None, "tool_calls": [call]}, result(i), note()))]


IN_PLACE: dict[str, tuple[RepairRule, Callable[[int], list[dict[str, Any]]], str]] = {
    "TM105 merges a long run of call turns": (split_parallel_turn, split_turns, "openai"),
    "TM109 removes many empty assistant messages": (empty_assistant_message, empty_assistants, "openai"),
    "TM108 removes many results of one call": (duplicate_tool_result, repeated_results, "openai"),
    "TM206 adds a user message after many blocks": (tool_image_parts, media_blocks, "openai"),
    "TM302 bridges many tool results": (mistral_role_bridge, bridged, "mistral"),
}


@pytest.mark.parametrize("name", IN_PLACE)
def test_a_rule_moves_each_message_a_bounded_number_of_times(name: str) -> None:
    rule, history, profile = IN_PLACE[name]
    small, large = moves(rule, history(SIZE), profile), moves(rule, history(2 * SIZE), profile)
    assert large <= RATIO * small, f"{name}: {small} messages moved, then {large}"


def test_a_long_run_of_results_is_merged_into_one() -> None:
    """What TM108 makes of many different results of one call, now written once: each text, in order, a blank line
    between them."""
    ctx = Context(repeated_results(5), {}, Policy(), get_profile("openai"))
    duplicate_tool_result.apply(ctx)
    assert ctx.messages[2]["content"] == "\n\n".join(f"result {i}" for i in range(5))
    assert len(ctx.messages) == 3 and len(ctx.findings) == 4


class CancelledAfter(Cancel):
    """Set by its own ``after``-th check: as if the client left while the rule before it ran."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.checked = after, 0

    def check(self) -> None:
        self.checked += 1
        if self.checked == self.after:
            self.set()
        super().check()


@pytest.mark.parametrize("name", ["chat interleaved (TM103)", "messages interleaved (TM103)", "responses interleaved, deepseek (TM103)"])
@pytest.mark.parametrize("after", [1, 3])
def test_a_cancelled_repair_runs_no_rule_after_the_cancel(name: str, after: int) -> None:
    dialect, profile, make = CASES[name]
    body = {"model": "m", **make(4)}
    planned = dialect.plan(body, dialect.profile(profile))
    assert planned is not None
    cancel = CancelledAfter(after)
    with pytest.raises(Cancelled):
        planned.repair({}, Policy(), cancel)
    assert cancel.checked == after  # checked before each rule: none ran once it was set


async def test_a_repair_stops_when_its_client_has_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large body is repaired in a thread; its client leaves while the first rule runs: the client's request ends
    (499, nothing upstream), and the thread runs no further rule."""
    in_first_rule, released, ended = threading.Event(), threading.Event(), threading.Event()
    later_rules: list[str] = []
    outcome: list[BaseException | None] = []
    first, later = malformed_message.apply, unanswered_tool_call.apply

    def first_rule(ctx: Context) -> None:
        in_first_rule.set()
        released.wait(HANG_GUARD)
        first(ctx)

    def later_rule(ctx: Context) -> None:
        later_rules.append(unanswered_tool_call.RULE.code)
        later(ctx)

    repaired = endpoint._repaired

    def watched_repair(*args: Any) -> Any:
        try:
            return repaired(*args)
        except BaseException as exc:
            outcome.append(exc)
            raise
        finally:
            ended.set()

    monkeypatch.setattr(malformed_message, "apply", first_rule)
    monkeypatch.setattr(unanswered_tool_call, "apply", later_rule)
    monkeypatch.setattr(endpoint, "_repaired", watched_repair)
    body = orjson.dumps({"model": "m", **chat_interleaved(4), "padding": "x" * endpoint.LARGE_BODY_BYTES})
    asgi = AsgiCall()
    headers = [(b"authorization", AUTH["authorization"].encode()), (b"content-type", b"application/json")]
    with respx.mock(base_url=UPSTREAM, assert_all_called=False) as upstream:
        route = upstream.post("/chat/completions").respond(json={"choices": []})
        async with running_proxy() as proxy:
            with anyio.fail_after(HANG_GUARD):
                handling = asyncio.create_task(call_asgi(proxy.app, asgi, "POST", "/v1/chat/completions", headers, [body]))
                assert await asyncio.to_thread(in_first_rule.wait, HANG_GUARD)
                asgi.disconnect.set()
                await handling  # answered while the first rule still runs
                released.set()
                assert await asyncio.to_thread(ended.wait, HANG_GUARD)
    assert asgi.status == endpoint.CLIENT_CLOSED_REQUEST and route.call_count == 0
    assert [type(exc) for exc in outcome] == [Cancelled]
    assert later_rules == []
