"""Tests for proxy.dialects.messages: the block helpers and the capture of Anthropic Messages answers."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.dialects.messages import blocks
from proxy.dialects.messages.capture import CAPTURE, MessagesStreamCapture, turns_from_json
from tests.support.hypothesis_budget import examples
from tests.support.messages_upstream import sse_events

# --- block helpers ------------------------------------------------------------------------------------


def test_block_predicates() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    search = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    redacted = {"type": "redacted_thinking", "data": "d"}
    assert blocks.is_tool_use(use) and not blocks.is_tool_use(server) and not blocks.is_tool_use(result)
    assert blocks.is_tool_result(result) and not blocks.is_tool_result(search)
    assert blocks.is_server_tool_result(search) and not blocks.is_server_tool_result(result)
    assert blocks.is_thinking(thinking) and blocks.is_thinking(redacted) and not blocks.is_thinking(use)
    assert blocks.tool_use_id_of(use) == blocks.tool_use_id_of(result) == "toolu_1"
    assert blocks.tool_use_id_of(server) is None and blocks.tool_use_id_of(search) is None
    assert blocks.tool_use_id_of({"type": "tool_use", "id": 7}) is None
    for junk in (None, "tool_use", ["tool_use"], {"type": 3}, {}):
        assert blocks.block_type(junk) is None
        assert not (blocks.is_tool_use(junk) or blocks.is_tool_result(junk) or blocks.is_thinking(junk))
        assert blocks.tool_use_id_of(junk) is None


def test_content_blocks() -> None:
    assert blocks.content_blocks({"role": "user", "content": "hi"}) == [{"type": "text", "text": "hi"}]
    assert blocks.content_blocks({"content": [{"type": "text", "text": "a"}, "junk", None, {"type": "x"}]}) == [
        {"type": "text", "text": "a"}, {"type": "x"}]
    for message in ({"content": None}, {"content": 3}, {}, "text", None):
        assert blocks.content_blocks(message) == []


@pytest.mark.parametrize(("value", "ok"), [
    ("toolu_01NGuJD7Pku4wqQzegRiBDyH", True), ("call-1_x", True), ("functions.Bash:0", False), ("a b", False), ("", False),
])
def test_tool_use_id_pattern(value: str, ok: bool) -> None:
    assert bool(blocks.TOOL_USE_ID_PATTERN.match(value)) is ok


def test_server_tool_use_id_pattern() -> None:
    assert blocks.SERVER_TOOL_USE_ID_PATTERN.match("srvtoolu_01abc")
    assert not blocks.SERVER_TOOL_USE_ID_PATTERN.match("toolu_01abc")
    assert not blocks.SERVER_TOOL_USE_ID_PATTERN.match("srvtoolu_01-abc")


# --- fixtures -----------------------------------------------------------------------------------------

THINKING = {"type": "thinking", "thinking": "The user wants weather in two cities.", "signature": "EqQBCkYIBhgCKkBsig=="}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}
TEXT = {"type": "text", "text": "Let me check both."}
CALL_A = {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris", "unit": "c"},
          "caller": {"type": "direct"}}
CALL_B = {"type": "tool_use", "id": "toolu_01B9z8y7x6w5v4u3t2s1r0q", "name": "get_time", "input": {"tz": "Europe/Paris"},
          "caller": {"type": "direct"}}
SERVER_CALL = {"type": "server_tool_use", "id": "srvtoolu_01Xyz", "name": "web_search", "input": {"query": "paris weather"}}
SEARCH_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01Xyz",
                 "content": [{"type": "web_search_result", "url": "https://example.com", "title": "Weather", "encrypted_content": "abc"}]}
UNKNOWN = {"type": "future_block", "payload": {"nested": [1, 2]}}
MESSAGE_ID = "msg_01WHRa8Ez2u3AHvd3iBZUY9B"


def message(*content: dict[str, Any], message_id: str = MESSAGE_ID, stop_reason: str = "tool_use") -> dict[str, Any]:
    return {"id": message_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": list(content),
            "stop_reason": stop_reason, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def turn(*content: dict[str, Any], message_id: str | None = MESSAGE_ID) -> dict[str, Any]:
    ids = [block["id"] for block in content if block["type"] == "tool_use"]
    return {"dialect": "messages", "ids": ids, "message_id": message_id, "blocks": list(content)}


def sse(events: list[tuple[str, Any]], eol: str = "\n") -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else orjson.dumps(data).decode()
        out.append(f"event: {name}{eol}data: {payload}{eol}{eol}")
    return "".join(out).encode()


def start(index: Any, block: Any) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": kind, **fields}}


def partial(index: int, text: str) -> tuple[str, dict[str, Any]]:
    return delta(index, "input_json_delta", partial_json=text)


def stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def capture(*chunks: bytes, max_bytes: int | None = None) -> MessagesStreamCapture:
    reader = CAPTURE.stream(max_bytes)
    for chunk in chunks:
        reader.feed(chunk)
    return reader


FULL = message(THINKING, REDACTED, TEXT, SERVER_CALL, SEARCH_RESULT, CALL_A, CALL_B, UNKNOWN)
FULL_TURN = turn(THINKING, REDACTED, TEXT, SERVER_CALL, SEARCH_RESULT, CALL_A, CALL_B, UNKNOWN)
FULL_STREAM = sse(sse_events(FULL, 3))

# --- JSON ---------------------------------------------------------------------------------------------


def test_json_whole_message_kept_in_order() -> None:
    turns = turns_from_json(orjson.dumps(FULL))
    assert turns == [FULL_TURN]
    assert [list(block) for block in turns[0]["blocks"]] == [list(block) for block in FULL["content"]]
    assert list(turns[0]) == ["dialect", "ids", "message_id", "blocks"]


def test_json_via_capture_protocol_and_bom() -> None:
    assert CAPTURE.from_json(b"\xef\xbb\xbf" + orjson.dumps(FULL)) == [FULL_TURN]


def test_json_without_client_tool_use_is_not_remembered() -> None:
    assert turns_from_json(orjson.dumps(message(THINKING, TEXT, stop_reason="end_turn"))) == []
    assert turns_from_json(orjson.dumps(message(SERVER_CALL, SEARCH_RESULT, TEXT))) == []
    assert turns_from_json(orjson.dumps(message({"type": "tool_use", "name": "f", "input": {}}))) == []


def test_json_message_id_optional_and_junk_entries_left_out() -> None:
    body = message(TEXT, CALL_A)
    body["id"] = 12
    body["content"].insert(1, "junk")
    assert turns_from_json(orjson.dumps(body)) == [turn(TEXT, CALL_A, message_id=None)]


@pytest.mark.parametrize("body", [
    b"", b"{", b"not json", b"\xff\xfe", b"null", b"[]", b'"message"',
    orjson.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    orjson.dumps({"type": "message", "content": "text"}),
    orjson.dumps({"type": "message", "role": "user", "content": [CALL_A]}),
    orjson.dumps({"type": "completion", "content": [CALL_A]}),
])
def test_json_garbage(body: bytes) -> None:
    assert turns_from_json(body) == []


def test_json_never_raises_on_non_bytes() -> None:
    assert turns_from_json(None) == []  # type: ignore[arg-type]


# --- SSE: the live recording of docs/provider-rules.md section 6.3 ----------------------------------------------------------

LIVE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-opus-4-7","id":"msg_01DgAEgLgB1ZhavZon4qGE1t",'
    b'"type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"stop_details":null,'
    b'"usage":{"input_tokens":798,"output_tokens":0}}    }\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use",'
    b'"id":"toolu_01M8nJQQMxqpv1VaPYuJKT4j","name":"get_weather","input":{},"caller":{"type":"direct"}}              }\n\n'
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""} }\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": "}   }\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\\"Pa"}    }\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"ris\\"}"}  }\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0           }\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null,"stop_details":null},'
    b'"usage":{"output_tokens":66}             }\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"            }\n\n'
)
LIVE_TURN = {"dialect": "messages", "ids": ["toolu_01M8nJQQMxqpv1VaPYuJKT4j"], "message_id": "msg_01DgAEgLgB1ZhavZon4qGE1t", "blocks": [
    {"type": "tool_use", "id": "toolu_01M8nJQQMxqpv1VaPYuJKT4j", "name": "get_weather", "input": {"city": "Paris"}, "caller": {"type": "direct"}}]}


def test_sse_live_recording() -> None:
    reader = capture(LIVE)
    assert reader.finished and not reader.abandoned
    assert reader.turns() == [LIVE_TURN]
    assert list(reader.turns()[0]["blocks"][0]) == ["type", "id", "name", "input", "caller"]  # the skeleton's key order


def test_sse_finished_only_at_message_stop() -> None:
    end = LIVE.index(b"event: message_stop")
    reader = capture(LIVE[:end])
    assert not reader.finished
    assert reader.turns() == [LIVE_TURN]  # the block was stopped: remembered even before the end
    reader.feed(LIVE[end:-1])
    assert not reader.finished  # the blank line that ends the event has not arrived
    reader.feed(LIVE[-1:])
    assert reader.finished


# --- SSE: thinking + signature + text + calls, every framing -------------------------------------------


def test_sse_equals_json() -> None:
    assert capture(FULL_STREAM).turns() == turns_from_json(orjson.dumps(FULL)) == [FULL_TURN]


def test_sse_every_single_split_point() -> None:
    for i in range(len(FULL_STREAM) + 1):
        assert capture(FULL_STREAM[:i], FULL_STREAM[i:]).turns() == [FULL_TURN], i


def test_sse_one_byte_at_a_time() -> None:
    reader = capture(*(FULL_STREAM[i : i + 1] for i in range(len(FULL_STREAM))))
    assert reader.finished
    assert reader.turns() == [FULL_TURN]


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
def test_sse_other_line_endings(eol: str) -> None:
    stream = sse(sse_events(FULL, 3), eol)
    for i in range(0, len(stream) + 1, 7):
        assert capture(stream[:i], stream[i:]).turns() == [FULL_TURN], i


def test_sse_bom_and_data_without_space() -> None:
    stream = b"\xef\xbb\xbf" + FULL_STREAM.replace(b"data: ", b"data:")
    assert capture(stream[:1], stream[1:2], stream[2:]).turns() == [FULL_TURN]


def test_sse_comments_and_other_fields() -> None:
    stream = b": keep-alive\n\n" + FULL_STREAM.replace(b"event: ", b"id: 7\nretry: 100\nevent: ")
    assert capture(stream).turns() == [FULL_TURN]


def test_sse_multibyte_utf8_split() -> None:
    call = dict(CALL_A, input={"q": "héllo 世界 🌍"})
    stream = sse(sse_events(message(THINKING, call), 2))
    emoji = stream.index("🌍".encode())
    for i in range(emoji - 3, emoji + 5):
        assert capture(stream[:i], stream[i:]).turns() == [turn(THINKING, call)], i


def test_sse_index_never_stored() -> None:
    events = [start(0, dict(CALL_A, index=0)), stop(0)]
    assert capture(sse(events)).turns() == [turn(CALL_A, message_id=None)]


def test_sse_citations_and_server_tool_input() -> None:
    citation = {"type": "web_search_result_location", "url": "https://example.com", "title": "Weather", "cited_text": "sunny"}
    events = [
        start(0, dict(SERVER_CALL, input={})),
        partial(0, '{"query": '),
        partial(0, '"paris weather"}'),
        stop(0),
        start(1, {"type": "text", "text": ""}),
        delta(1, "citations_delta", citation=citation),
        delta(1, "text_delta", text="It is sunny."),
        stop(1),
        start(2, dict(CALL_A, input={})),
        stop(2),  # no input_json_delta at all
    ]
    assert capture(sse(events)).turns() == [turn(
        SERVER_CALL, {"type": "text", "text": "It is sunny.", "citations": [citation]}, dict(CALL_A, input={}), message_id=None)]


def test_sse_empty_input_is_an_empty_object() -> None:
    events = [
        start(0, dict(CALL_A, input={"stale": 1})),
        partial(0, ""),
        partial(0, " "),
        stop(0),
    ]
    assert capture(sse(events)).turns()[0]["blocks"] == [dict(CALL_A, input={})]


@pytest.mark.parametrize("text", ['{"city": "Par', "[1, 2]", '"Paris"', "null"])
def test_sse_unreadable_input_is_not_remembered(text: str) -> None:
    events = [
        start(0, dict(CALL_A, input={})),
        partial(0, text),
        stop(0),
        start(1, CALL_B),
        stop(1),
    ]
    assert capture(sse(events)).turns() == [turn(CALL_B, message_id=None)]
    assert capture(sse(events[:3])).turns() == []


def test_sse_deltas_apply_only_to_their_block_types() -> None:
    events = [
        start(0, {"type": "text", "text": ""}),
        delta(0, "thinking_delta", thinking="x"),
        delta(0, "signature_delta", signature="x"),
        partial(0, "{}"),
        delta(0, "text_delta", text=5),
        delta(0, "text_delta", text="ok"),
        stop(0),
        start(1, dict(CALL_A, input={})),
        delta(1, "text_delta", text="stray"),
        delta(1, "citations_delta", citation={}),
        partial(1, '{"city": "Paris", "unit": "c"}'),
        stop(1),
    ]
    assert capture(sse(events)).turns() == [turn({"type": "text", "text": "ok"}, CALL_A, message_id=None)]


def test_sse_unsigned_thinking_as_compatible_servers_stream_it() -> None:
    kimi = {"type": "thinking", "thinking": "reason", "signature": ""}
    deepseek = {"type": "thinking", "thinking": "reason"}
    for block in (kimi, deepseek):
        stream = sse(sse_events(message(block, CALL_A), 2))
        assert capture(stream).turns() == turns_from_json(orjson.dumps(message(block, CALL_A))) == [turn(block, CALL_A)]


# --- cut-off streams, errors, limits, garbage ----------------------------------------------------------


def test_sse_cut_off_keeps_the_stopped_blocks() -> None:
    second = FULL_STREAM.index(b'"index":6')  # CALL_B starts: everything before it was stopped
    reader = capture(FULL_STREAM[: FULL_STREAM.index(b"event: content_block_delta", second)])
    assert not reader.finished
    assert reader.turns() == [turn(THINKING, REDACTED, TEXT, SERVER_CALL, SEARCH_RESULT, CALL_A)]


def test_sse_cut_off_mid_thinking_and_mid_call() -> None:
    mid_thinking = FULL_STREAM.index(b"signature_delta")
    assert capture(FULL_STREAM[:mid_thinking]).turns() == []
    # A call stopped before a half-streamed one: the first is remembered, without the thinking that never stopped.
    events = sse_events(message(THINKING, CALL_A, CALL_B), 2)
    stream = sse(events)
    cut = stream.index(b'"index":2,"delta"')
    assert capture(stream[:cut]).turns() == [turn(THINKING, CALL_A)]
    stop_of_a = sse([event for event in events if event[1].get("index") in (None, 1)][:-2])
    assert capture(stop_of_a).turns() == [turn(CALL_A)]


def test_sse_error_event_finishes_and_keeps_stopped_calls() -> None:
    cut = FULL_STREAM.index(b"event: content_block_start", FULL_STREAM.index(b'"index":5'))
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    reader = capture(FULL_STREAM[:cut] + sse([("error", error)]))
    assert reader.finished
    assert reader.turns() == [turn(THINKING, REDACTED, TEXT, SERVER_CALL, SEARCH_RESULT, CALL_A)]


def test_sse_only_an_error() -> None:
    reader = capture(sse([("error", {"type": "error", "error": {"type": "api_error", "message": "Internal"}})]))
    assert reader.finished and reader.turns() == []


def test_sse_max_bytes_abandons() -> None:
    reader = capture(FULL_STREAM[:100], FULL_STREAM[100:], max_bytes=len(FULL_STREAM) - 1)
    assert reader.abandoned and not reader.finished and reader.turns() == []
    exact = capture(FULL_STREAM[:100], FULL_STREAM[100:], max_bytes=len(FULL_STREAM))
    assert not exact.abandoned and exact.turns() == [FULL_TURN]


def test_sse_abandoned_reader_reads_nothing_more() -> None:
    reader = capture(FULL_STREAM[:200], max_bytes=300)
    reader.feed(FULL_STREAM[200:400])
    assert reader.abandoned
    reader.feed(FULL_STREAM[400:])
    assert reader.turns() == [] and not reader.finished


def test_sse_garbage_is_skipped() -> None:
    junk = [
        delta(0, "text_delta", text="before start"),
        stop(9),
        start("0", CALL_B),
        start(1, "tool_use"),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": "x"}),
        ("x", [1, 2]), ("x", "{not json"), ("x", "null"), ("x", '"str"'), ("message_start", {"type": "message_start", "message": "m"}),
    ]
    stream = b"random garbage line\n\n" + sse(junk) + b"data: \xff\xfe\n\n" + FULL_STREAM
    reader = capture(stream)
    reader.feed(None)  # type: ignore[arg-type]
    assert reader.turns() == [FULL_TURN]


def test_sse_restarted_block_replaces_the_unfinished_one() -> None:
    events = [
        start(0, dict(CALL_B, input={})),
        partial(0, '{"tz"'),
        start(0, dict(CALL_A, input={})),
        partial(0, '{"city": "Paris", "unit": "c"}'),
        stop(0),
        partial(0, "late"),
    ]
    assert capture(sse(events)).turns() == [turn(CALL_A, message_id=None)]


def test_sse_blocks_kept_in_index_order() -> None:
    # Claude streams one block after the other; a server that interleaves them still yields the JSON order.
    events = [start(1, CALL_B), start(0, TEXT), stop(1), stop(0)]
    assert capture(sse(events)).turns() == [turn(TEXT, CALL_B, message_id=None)]


def test_sse_first_message_id_wins() -> None:
    second_start = sse([("message_start", {"type": "message_start", "message": {"id": "msg_other"}})])
    first = FULL_STREAM.index(b"\n\n") + 2
    assert capture(FULL_STREAM[:first], second_start, FULL_STREAM[first:]).turns()[0]["message_id"] == MESSAGE_ID


def test_sse_turns_are_copies() -> None:
    reader = capture(FULL_STREAM)
    reader.turns()[0]["blocks"][5]["input"]["city"] = "mutated"
    reader.turns()[0]["blocks"].clear()
    assert reader.turns() == [FULL_TURN]


# --- property: random assistant message -> SSE -> random chunking == its JSON turn ---------------------

TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | TEXTS,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3), max_leaves=8)
IDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)


@st.composite
def assistant_messages(draw: st.DrawFn) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if draw(st.booleans()):
        content.append({"type": "thinking", "thinking": draw(TEXTS), "signature": draw(st.text("ABCxyz0123+/=", min_size=1, max_size=40))})
    if draw(st.booleans()):
        content.append({"type": "redacted_thinking", "data": draw(TEXTS)})
    if draw(st.booleans()):
        content.append({"type": "text", "text": draw(TEXTS)})
    for call_id in draw(st.lists(IDS, min_size=1, max_size=4, unique=True)):
        block = {"type": "tool_use", "id": "toolu_" + call_id, "name": draw(IDS), "input": draw(st.dictionaries(TEXTS, JSON_VALUES, max_size=4))}
        if draw(st.booleans()):
            block["caller"] = {"type": "direct"}
        content.append(block)
    return message(*content, message_id="msg_" + draw(IDS))


@settings(max_examples=examples(100))
@given(assistant_messages(), st.sampled_from(["\n", "\r\n", "\r"]), st.integers(1, 6), st.data())
def test_sse_roundtrip_property(body: dict[str, Any], eol: str, pieces: int, data: st.DataObject) -> None:
    stream = sse(sse_events(body, pieces), eol)
    splits = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *splits], [*splits, len(stream)], strict=True)]
    expected = turns_from_json(orjson.dumps(body))
    assert expected == [turn(*copy.deepcopy(body["content"]), message_id=body["id"])]
    reader = capture(*chunks)
    assert reader.finished
    assert reader.turns() == expected
