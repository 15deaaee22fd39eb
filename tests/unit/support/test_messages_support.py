"""The strict Messages validator and upstream behave as the Messages catalogue (AM-*) says."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from proxy.dialects.messages.capture import CAPTURE
from tests.support.ci import declared
from tests.support.client_tls import TLS
from tests.support.messages_upstream import DEFAULT_MODEL, HELLO, MessagesRecorder, make_messages_upstream
from tests.support.messages_validator import ServerState, Violation, check, violations
from tests.support.served import served
from tests.support.strict_upstream import serve

HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-test", "anthropic-beta": "interleaved-thinking-2025-05-14"}
TOOLS = [{"name": "get_weather", "description": "Weather for a city.", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
         {"name": "get_time", "input_schema": {"type": "object"}}]
MANUAL = {"type": "enabled", "budget_tokens": 1024}
ID_A = "toolu_01A09q90qw90lq917835lq9"
ID_B = "toolu_01B9z8y7x6w5v4u3t2s1r0q"
TAIL = " Each `tool_use` block must have a corresponding `tool_result` block in the next message."


def req(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": DEFAULT_MODEL, "max_tokens": 256, "messages": list(messages), **extra}


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def text(value: str = "What is the weather in Paris?") -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(call_id: str = ID_A, name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"city": "Paris"}, **extra}


def result(call_id: str = ID_A, content: Any = "22C, sunny", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def thinking(value: str = "Need the weather.", signature: str | None = "c2lnLTE=") -> dict[str, Any]:
    block = {"type": "thinking", "thinking": value}
    if signature is not None:
        block["signature"] = signature
    return block


def first(body: Any, **kwargs: Any) -> Violation | None:
    found = violations(body, **kwargs)
    return found[0] if found else None


# --- every rule: id, exact text, status ---------------------------------------------------------------

Q = user(text())

RULES: list[tuple[str, dict[str, Any], str]] = [
    ("AM-1", req(Q, assistant(use(ID_A), use(ID_B, "get_time")), user(result(ID_A))),
     f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {ID_B}.{TAIL}"),
    ("AM-1", req(Q, assistant(use(ID_A), use(ID_B)), user(text("never mind"))),  # ESC: the results never came
     f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {ID_A}, {ID_B}.{TAIL}"),
    ("AM-1", req(Q, assistant(text("x")), assistant(use(ID_A))),  # cut off: the history ends on the call
     f"messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: {ID_A}.{TAIL}"),
    ("AM-2", req(Q, assistant(use(ID_A)), user(text("here you go"), result(ID_A))),
     f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {ID_A}.{TAIL}"),
    ("AM-2", req(Q, assistant(use(ID_A)), user(text("still waiting")), user(result(ID_A))),  # merged turns
     f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {ID_A}.{TAIL}"),
    ("AM-3", req(Q, assistant(use(ID_A), text("I will check the weather.")), user(result(ID_A))),
     f"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {ID_A}.{TAIL}"),
    ("AM-4", req(Q, assistant(text("Hi")), user(result(ID_A))),
     f"messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {ID_A}. "
     "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."),
    ("AM-4", req(user(result(ID_A), text("go on"))),
     f"messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {ID_A}. "
     "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."),
    ("AM-4", req(Q, assistant(use(ID_A)), user(result(ID_A), result("toolu_fabricated"))),
     "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_fabricated. "
     "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."),
    ("AM-5", req(Q, assistant(use(ID_A)), user(result(ID_A), result(ID_A))),
     f"messages.2.content.1: each tool_use must have a single result. Found multiple `tool_result` blocks with id: {ID_A}"),
    ("AM-6", req(Q, assistant(use(ID_A), use(ID_A, "get_time")), user(result(ID_A))),
     "messages.1.content.1: tool_use ids must be unique"),
    ("AM-6", req(Q, assistant(use(ID_A)), user(result(ID_A)), assistant(text("again"), use(ID_A)), user(result(ID_A))),
     "messages.3.content.1: tool_use ids must be unique"),
    ("AM-7", req(Q, assistant(text("x"), use("functions.Bash:0")), user(result("functions.Bash:0"))),
     "messages.1.content.1.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"),
    ("AM-7", req(Q, assistant({"type": "server_tool_use", "id": "toolu_1", "name": "web_search", "input": {}})),
     "messages.1.content.0.server_tool_use.id: String should match pattern '^srvtoolu_[a-zA-Z0-9_]+$'"),
    ("AM-8", req(Q, assistant(dict(use(), input='{"city": "Paris"}')), user(result())),
     "messages.1.content.0.tool_use.input: Input should be a valid dictionary"),
    ("AM-9", req(Q, assistant(use()), user(result()), thinking=MANUAL),
     "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, "
     "a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
     "blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
     "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"),
    ("AM-10", req(Q, assistant(text("Let me see."), thinking(), use()), user(result()), thinking=MANUAL),
     "messages.1.content.0: If an assistant message contains any thinking blocks, the first block must be thinking or "
     "redacted_thinking. Found text."),
    ("AM-11", req(Q, assistant(thinking(), use()), user(result())),
     "messages.1.content.0: When thinking is disabled, an `assistant` message in the final position cannot contain `thinking`. "
     "To use thinking blocks, enable `thinking` in your request."),
    ("AM-12", req(Q, assistant(thinking()), user(text("and?"))),
     "messages.1: The final block in an assistant message cannot be `thinking`."),
    ("AM-15", req(Q, assistant(thinking(signature=None), use()), user(result()), thinking=MANUAL),
     "messages.1.content.0.thinking.signature: Field required"),
    ("AM-16", req(Q, assistant(thinking("", signature=""), use()), user(result()), thinking=MANUAL),  # neither text nor signature
     "messages.1.content.0.thinking.thinking: each thinking block must contain thinking"),
    ("AM-17", req(Q, assistant(text(""), use()), user(result())), "messages: text content blocks must be non-empty"),
    ("AM-17", req(Q, {"role": "assistant", "content": ""}, user(text("hi"))), "messages: text content blocks must be non-empty"),
    ("AM-17", req(Q, assistant(use()), user(result(content=[text("")]))), "messages: text content blocks must be non-empty"),
    ("AM-18", req(Q, assistant(text("x"), dict(use(), index=1)), user(result())),
     "messages.1.content.1.tool_use.index: Additional input is not allowed"),
    ("AM-18", req(Q, assistant(dict(thinking(), index=0), use()), user(result()), thinking=MANUAL),
     "messages.1.content.0.thinking.index: Additional input is not allowed"),
]


@pytest.mark.parametrize(("rule", "body", "message"), RULES, ids=[f"{rule}-{i}" for i, (rule, _, _) in enumerate(RULES)])
def test_rule_text_and_status(rule: str, body: dict[str, Any], message: str) -> None:
    found = first(body)
    assert found is not None
    assert (found.rule, found.status, found.message) == (rule, 400, message)
    assert check(orjson.dumps(body)) == found
    assert found.error_body("req_011CX") == {"type": "error", "error": {"type": "invalid_request_error", "message": message}, "request_id": "req_011CX"}


def test_am3_live_recording_request() -> None:
    # The request of the live AM-3 recording (claude-haiku-4-5, 2026-05-05), byte for byte, and its answer.
    raw = (b'{"model":"claude-haiku-4-5-20251001","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"call_1",'
           b'"name":"get_weather","input":{"city":"Paris"}},{"type":"text","text":"I will check the weather."}]},{"role":"user",'
           b'"content":[{"type":"tool_result","tool_use_id":"call_1","content":"{\\"temperature\\":\\"72F\\"}"}]},{"role":"user",'
           b'"content":[{"type":"text","text":"Use that result to answer briefly."}]}],"tools":[{"name":"get_weather","description":'
           b'"Get weather","input_schema":{"type":"object","properties":{}}}],"stream":true,"max_tokens":4096}')
    found = check(raw)
    assert found is not None and found.rule == "AM-3"
    assert found.message == ("messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: call_1. "
                             "Each `tool_use` block must have a corresponding `tool_result` block in the next message.")
    # The recorded fix: the text moved into its own assistant message before the call -> 200.
    fixed = orjson.loads(raw)
    fixed["messages"][0:1] = [assistant(text("I will check the weather.")), assistant(use("call_1"))]
    assert violations(fixed) == []


def test_am21_lone_surrogate_in_the_raw_body() -> None:
    raw = orjson.dumps(req(Q, assistant(use()))).replace(b'"Paris"', b'"Pa\\ud83dris"')
    found = check(raw)
    char = raw.index(b"\\ud83d")
    assert found == Violation("AM-21", f"The request body is not valid JSON: no low surrogate in string: line 1 column {char + 1} (char {char})")
    assert found.error_body()["error"]["type"] == "invalid_request_error"
    paired = raw.replace(b"\\ud83d", b"\\ud83d\\ude00")
    assert check(paired) is not None and check(paired).rule == "AM-1"  # a pair is fine: the next problem is the history's


@pytest.mark.parametrize(("body", "message"), [
    (b"{", "The request body is not valid JSON: unexpected end of data: line 1 column 2 (char 1)"),
    (b"[]", "Input should be a valid dictionary"),
    (orjson.dumps({"model": "m", "messages": [Q]}), "max_tokens: Field required"),
    (orjson.dumps({"max_tokens": 1, "messages": [Q]}), "model: Field required"),
    (orjson.dumps({"model": "m", "max_tokens": 1}), "messages: Field required"),
    (orjson.dumps({"model": "m", "max_tokens": 1, "messages": []}), "messages: at least one message is required"),
    (orjson.dumps(req({"role": "developer", "content": "x"})), "messages.0.role: Input should be 'user' or 'assistant'"),
    (orjson.dumps(req({"role": "system", "content": "x"})), "messages.0: use the top-level 'system' parameter for the initial system "
                                                            "prompt; the directive-only form (content: [] with output_config) is accepted at any position"),
    (orjson.dumps(req({"role": "user"})), "messages.0.content: Field required"),
    (orjson.dumps(req(user("bare string block"))), "messages.0.content.0: Input should be a valid dictionary"),
    (orjson.dumps(req(Q, assistant({"type": "tool_use", "id": ID_A, "input": {}}))), "messages.1.content.0.tool_use.name: Field required"),
])
def test_base_schema(body: bytes, message: str) -> None:
    found = check(body)
    assert found is not None and (found.rule, found.message, found.status) == ("BASE", message, 400)


def test_assistant_first_history_is_numbered_one_higher() -> None:
    found = first(req(assistant(text("x")), user(result())))
    assert found is not None and found.message.startswith("messages.2.content.0: unexpected `tool_use_id`")


def test_shape_comes_before_sequence() -> None:
    body = req(Q, assistant(use(ID_A), dict(use(ID_B), index=1)))  # AM-18 and AM-1 both apply
    assert [v.rule for v in violations(body)] == ["AM-18"]


# --- valid histories ----------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    req(Q),
    req({"role": "user", "content": "plain string"}),
    req(Q, assistant(text("Checking."), use(ID_A, cache_control={"type": "ephemeral"}, caller={"type": "direct"}), use(ID_B, "get_time")),
        user(result(ID_A, is_error=True), result(ID_B, content=[text("12:00")]), text("continue")),
        assistant(text("It is sunny.")), user(text("thanks"))),
    req(Q, assistant(use(ID_A)), user(result(ID_A)), user(text("merged with the results"))),
    req(Q, assistant(text("Let me check.")), assistant(use(ID_A)), user(result(ID_A))),  # split around the call: fine
    req(Q, assistant(use(ID_A)), user(result(ID_A)), thinking={"type": "adaptive"}),  # AM-9 is for manual thinking only
    req(Q, assistant(thinking(), use(ID_A)), user(result(ID_A)), assistant(text("Done.")), user(text("next"))),  # an old turn's thinking
    req(Q, assistant(thinking(), use(ID_A)), user(result(ID_A)), thinking=MANUAL),
    req(Q, assistant({"type": "redacted_thinking", "data": "abc"}, use(ID_A)), user(result(ID_A)), thinking=MANUAL),
    req(Q, assistant(thinking(""), use(ID_A)), user(result(ID_A)), thinking=MANUAL),  # signed, its text omitted (display "omitted")
    req(user({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}, text("what is this?"))),
    req(Q, assistant({"type": "server_tool_use", "id": "srvtoolu_01a", "name": "web_search", "input": {"query": "q"}},
                     {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01a", "content": []}, text("Found it."))),
], ids=lambda body: "-".join(m["role"][0] for m in body["messages"]))
def test_valid_histories_accepted(body: dict[str, Any]) -> None:
    assert violations(body) == []
    assert check(orjson.dumps(body)) is None


def test_count_tokens_needs_no_max_tokens() -> None:
    body = {"model": DEFAULT_MODEL, "messages": [Q]}
    assert violations(body, count_tokens=True) == []
    assert [v.message for v in violations(body)] == ["max_tokens: Field required"]


# --- signatures: AM-13, AM-14, profiles ----------------------------------------------------------------

MINTED = thinking("The user wants Paris weather.", "EqQBCkYIBhgCKkB0aWNr")
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}


@pytest.fixture
def state() -> ServerState:
    state = ServerState()
    state.mint([MINTED, REDACTED, text("Let me check."), use(ID_A)], system="You are terse.")
    return state


def loop(*blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A history in the middle of its tool loop, with manual thinking: the assistant message is the latest."""
    return req(Q, assistant(*blocks), user(result(ID_A)), **{"thinking": MANUAL, "system": "You are terse.", **extra})


def test_minted_blocks_replayed_unchanged_are_valid(state: ServerState) -> None:
    assert state.minted == 2
    assert violations(loop(MINTED, REDACTED, text("Let me check."), use(ID_A)), state=state) == []
    # The latest message's other blocks are not part of the rule (a client may drop the text).
    assert violations(loop(MINTED, REDACTED, use(ID_A)), state=state) == []


@pytest.mark.parametrize(("blocks", "position"), [
    ((dict(MINTED, thinking="The user wants Paris weather!"), REDACTED, use(ID_A)), 0),  # text altered
    ((REDACTED, MINTED, use(ID_A)), 0),  # reordered
    ((MINTED, use(ID_A)), 1),  # trimmed: the redacted block is missing
])
def test_am13_latest_thinking_modified(state: ServerState, blocks: tuple[dict[str, Any], ...], position: int) -> None:
    found = first(loop(*blocks), state=state)
    assert found is not None and found.rule == "AM-13"
    assert found.message == (f"messages.1.content.{position}: `thinking` or `redacted_thinking` blocks in the latest assistant message "
                             "cannot be modified. These blocks must remain as they were in the original response.")


def test_am14_unknown_signature(state: ServerState) -> None:
    found = first(loop(thinking("forged", "Zm9yZ2Vk"), use(ID_A)), state=state)
    assert found is not None and (found.rule, found.message) == ("AM-14", "messages.1.content.0: Invalid `signature` in `thinking` block")
    redacted = first(loop(MINTED, dict(REDACTED, data="other"), use(ID_A)), state=state)
    assert redacted is not None and (redacted.rule, redacted.message) == ("AM-14", "messages.1.content.1: Invalid `data` in `redacted_thinking` block")


def test_am14_altered_block_in_an_earlier_turn(state: ServerState) -> None:
    body = req(Q, assistant(dict(MINTED, thinking="edited"), REDACTED, use(ID_A)), user(result(ID_A)), assistant(text("Sunny.")),
               user(text("and tomorrow?")), thinking=MANUAL, system="You are terse.")
    found = first(body, state=state)
    assert found is not None and (found.rule, found.message) == ("AM-14", "messages.1.content.0: Invalid `signature` in `thinking` block")


def test_am14_binding_variant() -> None:
    state = ServerState(bind_system=True)
    state.mint([MINTED, use(ID_A)], system="You are terse.")
    assert violations(loop(MINTED, use(ID_A)), state=state) == []
    found = first(loop(MINTED, use(ID_A), system="You are verbose."), state=state)
    assert found is not None and found.rule == "AM-14"
    assert found.message == (
        "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the "
        'block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block". That setting requires the '
        "`thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header. The `system` prompt differs from the one "
        "this block was created with.")


def test_signatures_unchecked_without_state() -> None:
    assert violations(loop(thinking("forged", "Zm9yZ2Vk"), use(ID_A))) == []


@pytest.mark.parametrize(("profile", "empty", "missing"), [
    ("anthropic", "AM-14", "AM-15"),
    ("kimi", None, "AM-15"),
    ("deepseek", None, None),
])
def test_unsigned_thinking_by_profile(state: ServerState, profile: Any, empty: str | None, missing: str | None) -> None:
    for block, expected in ((thinking(signature=""), empty), (thinking(signature=None), missing)):
        found = first(loop(block, use(ID_A)), profile=profile, state=state)
        assert (found.rule if found else None) == expected, (profile, block)
    foreign = first(loop(thinking(signature="Zm9yZWlnbg=="), use(ID_A)), profile=profile, state=state)
    assert foreign is not None and foreign.rule == "AM-14"  # a non-empty signature must be one this server minted


def test_unknown_profile_refused() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        violations(req(Q), profile="openai")  # type: ignore[arg-type]


# --- the upstream ---------------------------------------------------------------------------------------

TOOL_ID = re.compile(r"^toolu_[A-Za-z0-9]{24}$")


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, MessagesRecorder]]:
    with served(make_messages_upstream(seed=7)) as served_upstream:
        yield served_upstream


@pytest.fixture
def claude(upstream: tuple[str, MessagesRecorder]) -> Iterator[tuple[httpx.Client, MessagesRecorder]]:
    url, recorder = upstream
    recorder.reset()
    with httpx.Client(base_url=url, headers=HEADERS, timeout=10, verify=TLS) as client:
        yield client, recorder


def ask(**extra: Any) -> dict[str, Any]:
    return req(user(text()), tools=TOOLS, **extra)


def answered(body: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """``body`` continued with ``answer`` and a result for each of its calls."""
    results = [result(block["id"], f"result of {block['id']}") for block in answer["content"] if block["type"] == "tool_use"]
    return dict(body, messages=[*body["messages"], assistant(*answer["content"]), user(*results)])


def test_upstream_tool_answer_with_thinking(claude: tuple[httpx.Client, MessagesRecorder]) -> None:
    client, recorder = claude
    response = client.post("/v1/messages", json=ask(thinking=MANUAL))
    assert response.status_code == 200 and response.headers["request-id"].startswith("req_")
    answer = response.json()
    assert answer == recorder.responses[-1]
    assert (answer["type"], answer["role"], answer["stop_reason"], answer["model"]) == ("message", "assistant", "tool_use", DEFAULT_MODEL)
    assert [block["type"] for block in answer["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    calls = answer["content"][2:]
    assert all(TOOL_ID.match(call["id"]) for call in calls) and calls[0]["id"] != calls[1]["id"]
    assert [(call["name"], call["input"], call["caller"]) for call in calls] == [
        ("get_weather", {"city": "Paris", "n": 1}, {"type": "direct"}), ("get_time", {"city": "Tokyo", "n": 2}, {"type": "direct"})]
    assert recorder.state.lookup(answer["content"][0]) is not None
    assert recorder.emitted_turns == [answer["content"]] and recorder.emitted_calls == calls
    again = client.post("/v1/messages", json=ask(thinking=MANUAL)).json()
    assert again["content"][0]["signature"] != answer["content"][0]["signature"]


def test_upstream_full_loop_and_its_strictness(claude: tuple[httpx.Client, MessagesRecorder]) -> None:
    client, recorder = claude
    body = ask(thinking=MANUAL)
    answer = client.post("/v1/messages", json=body).json()
    follow = answered(body, answer)
    done = client.post("/v1/messages", json=follow)
    assert done.status_code == 200
    assert done.json()["content"] == [text("Received 2 tool results.")] and done.json()["stop_reason"] == "end_turn"
    # The same history with the assistant message dropped: AM-4, answered as Anthropic does.
    dropped = dict(follow, messages=[follow["messages"][0], follow["messages"][2]])
    refused = client.post("/v1/messages", json=dropped)
    call_id = answer["content"][2]["id"]
    assert refused.status_code == 400
    assert refused.json() == {"type": "error", "error": {"type": "invalid_request_error", "message":
                              f"messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {call_id}. Each `tool_result` "
                              "block must have a corresponding `tool_use` block in the previous message."},
                              "request_id": refused.headers["request-id"]}
    assert recorder.rejections == [refused.json()]
    # Its thinking re-serialised with a change: AM-13.
    altered = orjson.loads(orjson.dumps(follow))
    altered["messages"][1]["content"][0]["thinking"] += " "
    assert client.post("/v1/messages", json=altered).json()["error"]["message"].startswith(
        "messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified.")


def test_upstream_without_thinking_parallel_header_and_hello(claude: tuple[httpx.Client, MessagesRecorder]) -> None:
    client, _ = claude
    answer = client.post("/v1/messages", json=ask(), headers={"x-test-parallel-calls": "3"}).json()
    assert [block["type"] for block in answer["content"]] == ["text", "tool_use", "tool_use", "tool_use"]
    assert [block["name"] for block in answer["content"][1:]] == ["get_weather", "get_time", "get_weather"]
    assert client.post("/v1/messages", json=ask(), headers={"x-test-parallel-calls": "0"}).status_code == 400
    hello = client.post("/v1/messages", json=req(user(text("hi")), thinking=MANUAL)).json()
    assert [block["type"] for block in hello["content"]] == ["thinking", "text"] and hello["content"][1]["text"] == HELLO


def test_upstream_stream_is_the_real_event_sequence(claude: tuple[httpx.Client, MessagesRecorder]) -> None:
    client, recorder = claude
    with client.stream("POST", "/v1/messages", json=ask(thinking=MANUAL, stream=True)) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        chunks = list(response.iter_raw())
    raw = b"".join(chunks)
    events = [(m[1].decode(), orjson.loads(m[2])) for m in re.finditer(rb"event: (\w+)\ndata: (.*)\n\n", raw)]
    assert sum(len(m[0]) for m in re.finditer(rb"event: (\w+)\ndata: (.*)\n\n", raw)) == len(raw)
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert events[0][1]["message"]["content"] == [] and events[-2][1]["delta"]["stop_reason"] == "tool_use"
    kinds = [data["delta"]["type"] for name, data in events if name == "content_block_delta"]
    assert {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"} == set(kinds)
    assert kinds.count("thinking_delta") > 1 and kinds.count("signature_delta") == 1
    assert events[1][1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    reader = CAPTURE.stream(None)
    for chunk in chunks:
        reader.feed(chunk)
    assert reader.finished
    message = recorder.responses[-1]
    assert reader.turns()[0]["blocks"] == message["content"] and reader.turns()[0]["message_id"] == message["id"]
    assert CAPTURE.from_json(orjson.dumps(message)) == reader.turns()


def test_upstream_records_bytes_and_headers(claude: tuple[httpx.Client, MessagesRecorder]) -> None:
    client, recorder = claude
    raw = orjson.dumps(ask())
    client.post("/v1/messages", content=raw, headers={"content-type": "application/json"})
    seen = recorder.last
    assert (seen.body_bytes, seen.path, seen.json) == (raw, "/v1/messages", orjson.loads(raw))
    assert [seen.headers[name] for name in ("x-api-key", "anthropic-version", "anthropic-beta")] == [
        HEADERS["x-api-key"], HEADERS["anthropic-version"], HEADERS["anthropic-beta"]]


def test_upstream_lone_surrogate(claude: tuple[httpx.Client, MessagesRecorder]) -> None:
    client, _ = claude
    raw = orjson.dumps(ask()).replace(b"Paris?", b"Paris\\ud83d?")
    response = client.post("/v1/messages", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("The request body is not valid JSON: no low surrogate in string: line 1 column ")


def test_upstream_count_tokens_models_and_catch_all(claude: tuple[httpx.Client, MessagesRecorder]) -> None:
    client, recorder = claude
    counted = client.post("/v1/messages/count_tokens", json={"model": DEFAULT_MODEL, "messages": [Q]})
    assert counted.status_code == 200 and counted.json()["input_tokens"] >= 1
    bad = client.post("/v1/messages/count_tokens", json={"model": DEFAULT_MODEL, "messages": [user(result())]})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("messages.0.content.0: unexpected `tool_use_id`")
    models = client.get("/v1/models").json()
    assert [model["id"] for model in models["data"]] == [DEFAULT_MODEL] and models["has_more"] is False
    missing = client.delete("/v1/files/file_01")
    assert missing.status_code == 404
    assert missing.json()["error"] == {"type": "not_found_error", "message": "Not found: DELETE /v1/files/file_01"}
    assert [seen.path for seen in recorder.requests] == ["/v1/messages/count_tokens"] * 2 + ["/v1/models", "/v1/files/file_01"]


def test_upstream_auth_and_version() -> None:
    app, recorder = make_messages_upstream(api_key="sk-ant-right")
    with serve(app) as url:
        wrong = httpx.post(url + "/v1/messages", json=ask(), headers=dict(HEADERS, **{"x-api-key": "sk-ant-wrong"}), verify=TLS)
        assert wrong.status_code == 401
        assert wrong.json()["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
        headers = {"x-api-key": "sk-ant-right"}
        versionless = httpx.post(url + "/v1/messages", json=ask(), headers=headers, verify=TLS)
        assert versionless.status_code == 400
        assert versionless.json()["error"]["message"] == "anthropic-version: header is required"
        assert httpx.post(url + "/v1/messages", json=ask(), headers=dict(headers, **{"anthropic-version": "2023-06-01"}), verify=TLS).status_code == 200
    assert len(recorder.requests) == 3


@pytest.mark.parametrize(("profile", "unsigned", "anthropic_says"), [
    ("kimi", {"signature": ""}, "messages.1.content.0: Invalid `signature` in `thinking` block"),
    ("deepseek", {}, "messages.1.content.0.thinking.signature: Field required"),
])
def test_compatible_upstreams_emit_and_accept_unsigned_thinking(profile: Any, unsigned: dict[str, str], anthropic_says: str) -> None:
    app, recorder = make_messages_upstream(profile=profile)
    strict, _ = make_messages_upstream()
    with serve(app) as url, serve(strict) as anthropic_url:
        body = ask(thinking=MANUAL)
        answer = httpx.post(url + "/v1/messages", json=body, headers=HEADERS, verify=TLS).json()
        block = answer["content"][0]
        assert block == {"type": "thinking", "thinking": block["thinking"], **unsigned}
        assert "caller" not in answer["content"][-1]
        follow = answered(body, answer)
        assert httpx.post(url + "/v1/messages", json=follow, headers=HEADERS, verify=TLS).status_code == 200
        # The same history sent to Anthropic: unsigned thinking is refused.
        refused = httpx.post(anthropic_url + "/v1/messages", json=follow, headers=HEADERS, verify=TLS).json()
        assert refused["error"]["message"] == anthropic_says
    assert recorder.state.minted == 0


def test_redacted_thinking_upstream() -> None:
    app, recorder = make_messages_upstream(redacted=True, preamble=None)
    with serve(app) as url:
        body = ask(thinking=MANUAL)
        answer = httpx.post(url + "/v1/messages", json=body, headers=HEADERS, verify=TLS).json()
        assert [block["type"] for block in answer["content"]] == ["thinking", "redacted_thinking", "tool_use", "tool_use"]
        assert recorder.state.minted == 2
        assert httpx.post(url + "/v1/messages", json=answered(body, answer), headers=HEADERS, verify=TLS).status_code == 200
    with pytest.raises(ValueError, match="redacted_thinking"):
        make_messages_upstream(profile="kimi", redacted=True)


# --- the official client reads the upstream's answers ------------------------------------------------------


def test_anthropic_sdk_reads_json_sse_and_errors(upstream: tuple[str, MessagesRecorder]) -> None:
    anthropic = declared("anthropic")
    url, recorder = upstream
    recorder.reset()
    client = anthropic.Anthropic(base_url=url, api_key=HEADERS["x-api-key"], max_retries=0)
    message = client.messages.create(model=DEFAULT_MODEL, max_tokens=256, messages=[Q], tools=TOOLS, thinking=MANUAL)
    assert message.stop_reason == "tool_use"
    assert message.to_dict()["content"] == recorder.responses[-1]["content"]
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    with client.messages.stream(model=DEFAULT_MODEL, max_tokens=256, messages=[Q], tools=TOOLS, thinking=MANUAL) as stream:
        final = stream.get_final_message()
    streamed = recorder.responses[-1]
    assert final.id == streamed["id"] and final.stop_reason == "tool_use"
    assert final.to_dict()["content"] == streamed["content"]  # the SDK's own accumulator agrees with the upstream's JSON form
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=DEFAULT_MODEL, max_tokens=256, messages=[user(result())])
    assert caught.value.status_code == 400
    assert caught.value.body["error"]["message"].startswith("messages.0.content.0: unexpected `tool_use_id`")
    assert caught.value.request_id == recorder.rejections[-1]["request_id"]
