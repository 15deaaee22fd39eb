"""Tests for proxy.capture: extracting the tool-call turns to remember from upstream answers."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.dialects.chat.capture import StreamCapture, turns_from_json
from proxy.turns import make_turn


def completion(*messages: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [
                {"index": i, "message": m, "finish_reason": "tool_calls"} for i, m in enumerate(messages)
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )


def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o", "choices": choices, **extra}


def sse(events: list[Any], eol: str = "\n") -> bytes:
    out = []
    for event in events:
        payload = event if isinstance(event, str) else orjson.dumps(event).decode()
        out.append(f"data: {payload}{eol}{eol}")
    return "".join(out).encode()


def capture(*chunks: bytes) -> StreamCapture:
    cap = StreamCapture()
    for c in chunks:
        cap.feed(c)
    return cap


# --- non-streaming ------------------------------------------------------------------------------------

PARALLEL = [
    {
        "id": "call_a",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        "extra_content": {"google": {"thought_signature": "c2lnLWE="}},
    },
    {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": '{"tz":"CET"}'}},
]


def test_json_parallel_calls_kept_exactly() -> None:
    body = completion({"role": "assistant", "content": None, "tool_calls": PARALLEL})
    turns = turns_from_json(body)
    assert turns == [make_turn(PARALLEL, None, None)]
    assert list(turns[0]["tool_calls"][0]) == ["id", "type", "function", "extra_content"]


def test_json_content_and_reasoning() -> None:
    body = completion(
        {"role": "assistant", "content": "Checking.", "reasoning_content": "think", "tool_calls": PARALLEL[1:]}
    )
    assert turns_from_json(body) == [make_turn(PARALLEL[1:], "Checking.", "think")]


def test_json_reasoning_alias() -> None:
    body = completion({"role": "assistant", "content": "", "reasoning": "r", "tool_calls": PARALLEL[:1]})
    assert turns_from_json(body) == [make_turn(PARALLEL[:1], "", "r")]


def test_json_several_choices() -> None:
    body = completion(
        {"role": "assistant", "content": None, "tool_calls": PARALLEL[:1]},
        {"role": "assistant", "content": "just text"},
        {"role": "assistant", "content": None, "tool_calls": PARALLEL[1:]},
    )
    assert turns_from_json(body) == [make_turn(PARALLEL[:1]), make_turn(PARALLEL[1:])]


def test_json_text_only_answer() -> None:
    assert turns_from_json(completion({"role": "assistant", "content": "Hello"})) == []
    assert turns_from_json(completion({"role": "assistant", "content": None, "tool_calls": []})) == []


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b"\xff\xfe", b'{"choices": [', b"null"])
def test_json_invalid(body: bytes) -> None:
    assert turns_from_json(body) == []


@pytest.mark.parametrize(
    "obj",
    [
        [],
        "str",
        {"choices": None},
        {"choices": {"0": {}}},
        {"choices": [None, 1, "x"]},
        {"choices": [{"message": "text"}]},
        {"choices": [{"message": {"tool_calls": "call"}}]},
        {"choices": [{"message": {"tool_calls": [1, None, "x"]}}]},
        {"error": {"message": "rate limited", "type": "rate_limit"}},
    ],
)
def test_json_wrong_types(obj: Any) -> None:
    assert turns_from_json(orjson.dumps(obj)) == []


def test_json_wrong_typed_content_is_none() -> None:
    body = completion({"role": "assistant", "content": [{"type": "text"}], "reasoning_content": 3, "tool_calls": PARALLEL})
    assert turns_from_json(body) == [make_turn(PARALLEL, None, None)]


def test_json_never_raises_on_non_bytes() -> None:
    assert turns_from_json(None) == []  # type: ignore[arg-type]


# --- streaming ----------------------------------------------------------------------------------------

OPENAI_EVENTS: list[Any] = [
    chunk([{"index": 0, "delta": {"role": "assistant", "content": None}, "logprobs": None, "finish_reason": None}]),
    chunk([{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    ]}, "finish_reason": None}]),
    chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}}]),
    chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Pa'}}]}}]),
    chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ris"}'}}]}}]),
    chunk([{"index": 0, "delta": {"tool_calls": [
        {"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": ""}}
    ]}}]),
    chunk([{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": '{"tz":'}}]}}]),
    chunk([{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": '"CET"}'}}]}}]),
    chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    chunk([], usage={"prompt_tokens": 80, "completion_tokens": 40, "total_tokens": 120}),
    "[DONE]",
]
OPENAI_STREAM = sse(OPENAI_EVENTS)
OPENAI_TURNS = [make_turn([
    {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
    {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": '{"tz":"CET"}'}},
])]


def test_sse_realistic_openai_stream() -> None:
    assert capture(OPENAI_STREAM).turns() == OPENAI_TURNS


def test_sse_every_single_split_point() -> None:
    for i in range(len(OPENAI_STREAM) + 1):
        assert capture(OPENAI_STREAM[:i], OPENAI_STREAM[i:]).turns() == OPENAI_TURNS, i


def test_sse_one_byte_at_a_time() -> None:
    cap = StreamCapture()
    for i in range(len(OPENAI_STREAM)):
        cap.feed(OPENAI_STREAM[i : i + 1])
    assert cap.turns() == OPENAI_TURNS


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
def test_sse_other_line_endings(eol: str) -> None:
    stream = sse(OPENAI_EVENTS, eol)
    assert capture(stream).turns() == OPENAI_TURNS
    for i in range(len(stream) + 1):
        assert capture(stream[:i], stream[i:]).turns() == OPENAI_TURNS, i


def test_sse_crlf_split_between_cr_and_lf() -> None:
    stream = sse(OPENAI_EVENTS, "\r\n")
    cap = StreamCapture()
    start = 0
    for i in range(len(stream)):
        if stream[i : i + 1] == b"\r":
            cap.feed(stream[start : i + 1])
            start = i + 1
    cap.feed(stream[start:])
    assert cap.turns() == OPENAI_TURNS


def test_sse_data_without_space_and_bom() -> None:
    # Without the role chunk, the first event carries the first call: a BOM mishandled would lose it.
    stream = b"\xef\xbb\xbf" + sse(OPENAI_EVENTS[1:]).replace(b"data: ", b"data:")
    assert capture(stream).turns() == OPENAI_TURNS
    assert capture(stream[:1], stream[1:2], stream[2:]).turns() == OPENAI_TURNS


def test_sse_two_choices_interleaved() -> None:
    def call_delta(choice: int, call: dict[str, Any]) -> dict[str, Any]:
        return chunk([{"index": choice, "delta": {"tool_calls": [call]}}])

    events = [
        chunk([{"index": 0, "delta": {"role": "assistant"}}, {"index": 1, "delta": {"role": "assistant"}}]),
        call_delta(1, {"index": 0, "id": "call_y", "type": "function", "function": {"name": "b", "arguments": ""}}),
        call_delta(0, {"index": 0, "id": "call_x", "type": "function", "function": {"name": "a", "arguments": "{"}}),
        call_delta(1, {"index": 0, "function": {"arguments": '{"k":'}}),
        call_delta(0, {"index": 0, "function": {"arguments": "}"}}),
        call_delta(1, {"index": 0, "function": {"arguments": "1}"}}),
        chunk([{"index": 1, "delta": {}, "finish_reason": "tool_calls"}]),
        chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
        "[DONE]",
    ]
    assert capture(sse(events)).turns() == [
        make_turn([{"id": "call_x", "type": "function", "function": {"name": "a", "arguments": "{}"}}]),
        make_turn([{"id": "call_y", "type": "function", "function": {"name": "b", "arguments": '{"k":1}'}}]),
    ]


def test_sse_deltas_without_index() -> None:
    def delta(call: dict[str, Any]) -> dict[str, Any]:
        return chunk([{"index": 0, "delta": {"tool_calls": [call]}}])

    events = [
        delta({"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a"'}}),
        delta({"function": {"arguments": ":1}"}}),
        delta({"id": "c2", "function": {"name": "g", "arguments": ""}}),
        delta({"id": "c2", "function": {"name": "g", "arguments": "{}"}}),  # provider repeats id and name
        "[DONE]",
    ]
    assert capture(sse(events)).turns() == [make_turn([
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ])]


def test_sse_index_reused_for_new_call() -> None:
    # Some OpenAI-compatible servers put every complete parallel call at index 0.
    events = [
        chunk([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c2", "type": "function", "function": {"name": "g", "arguments": "{"}}]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}}]),
    ]
    assert [c["id"] for c in capture(sse(events)).turns()[0]["tool_calls"]] == ["c1", "c2"]
    assert capture(sse(events)).turns()[0]["tool_calls"][1]["function"]["arguments"] == "{}"
    # Coming back to an earlier id at the same index continues that call, and so do id-less deltas after it.
    events[2:] = [
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": " "}}]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\n"}}]}}]),
    ]
    args = [c["function"]["arguments"] for c in capture(sse(events)).turns()[0]["tool_calls"]]
    assert args == ["{} \n", "{"]


def test_sse_cut_off_mid_arguments() -> None:
    cut = OPENAI_STREAM.index(b'ty\\": \\"Pa') + 4
    cap = capture(OPENAI_STREAM[:cut])
    assert cap.turns() == [make_turn([
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"ci'}}
    ])]
    # turns() does not disturb the reader: the rest of the stream still assembles correctly.
    cap.feed(OPENAI_STREAM[cut:])
    assert cap.turns() == OPENAI_TURNS


def test_sse_turns_before_any_id() -> None:
    assert capture(sse(OPENAI_EVENTS[:1])).turns() == []
    assert StreamCapture().turns() == []


def test_sse_comments_and_other_fields() -> None:
    body = OPENAI_STREAM.replace(b"data: ", b": keep-alive\nevent: message\nid: 7\nretry: 1000\ndata: ")
    stream = b": OPENROUTER PROCESSING\n\n" + body
    assert capture(stream).turns() == OPENAI_TURNS


def test_sse_multiline_data_event() -> None:
    event = orjson.dumps(OPENAI_EVENTS[1], option=orjson.OPT_INDENT_2).decode()
    multi = "".join(f"data: {line}\n" for line in event.split("\n")) + "\n"
    stream = multi.encode() + sse(OPENAI_EVENTS[2:])
    assert capture(stream).turns() == OPENAI_TURNS


def test_sse_multiline_event_crlf_split_everywhere() -> None:
    # A ``\n`` arriving after a chunk-final ``\r`` must not become a blank line that cuts the event short.
    event = orjson.dumps(OPENAI_EVENTS[1], option=orjson.OPT_INDENT_2).decode()
    stream = ("".join(f"data: {line}\r\n" for line in event.split("\n")) + "\r\n").encode()
    stream += sse(OPENAI_EVENTS[2:], "\r\n")
    for i in range(len(stream) + 1):
        assert capture(stream[:i], stream[i:]).turns() == OPENAI_TURNS, i


def test_sse_missing_blank_lines_between_events() -> None:
    stream = OPENAI_STREAM.replace(b"\n\n", b"\n")
    assert capture(stream + b"\n").turns() == OPENAI_TURNS


def test_sse_invalid_json_event_skipped() -> None:
    events = [OPENAI_EVENTS[0], "{not json", "\u00ff garbage", *OPENAI_EVENTS[1:]]
    stream = sse(events) + b"data: \xff\xfe\n\n"
    assert capture(b"random garbage line\n\n", stream).turns() == OPENAI_TURNS


def test_sse_error_and_odd_chunks_ignored() -> None:
    events = [
        {"error": {"message": "overloaded", "code": 529},
         "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "bad"}]}}]},
        [1, 2],
        {"choices": [None, {"index": 0, "delta": "x"}, {"index": 0, "delta": {"tool_calls": [None, 3]}}]},
        *OPENAI_EVENTS,
    ]
    cap = capture(sse(events))
    cap.feed(None)  # type: ignore[arg-type]
    assert cap.turns() == OPENAI_TURNS


def test_sse_reasoning_and_content() -> None:
    events = [
        chunk([{"index": 0, "delta": {"role": "assistant", "content": "", "reasoning_content": "The user "}}]),
        chunk([{"index": 0, "delta": {"reasoning_content": "wants weather."}}]),
        chunk([{"index": 0, "delta": {"content": "Let me "}}]),
        chunk([{"index": 0, "delta": {"content": "check."}}]),
        *OPENAI_EVENTS[1:],
    ]
    turns = capture(sse(events)).turns()
    assert turns == [make_turn(OPENAI_TURNS[0]["tool_calls"], "Let me check.", "The user wants weather.")]


def test_sse_reasoning_alias() -> None:
    events = [chunk([{"index": 0, "delta": {"reasoning": "hmm", "reasoning_content": None}}]), *OPENAI_EVENTS[1:]]
    assert capture(sse(events)).turns()[0]["reasoning_content"] == "hmm"


def test_sse_multibyte_utf8_split_in_arguments() -> None:
    args = '{"q": "héllo 世界 🌍"}'
    events = [
        chunk([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_u", "type": "function", "function": {"name": "search", "arguments": args[:8]}}]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": args[8:]}}]}}]),
    ]
    stream = sse(events)
    assert "🌍".encode() in stream  # orjson writes raw UTF-8, so the split really lands inside the character
    expected = [make_turn([{"id": "call_u", "type": "function", "function": {"name": "search", "arguments": args}}])]
    emoji = stream.index("🌍".encode())
    for i in range(emoji - 8, emoji + 5):
        assert capture(stream[:i], stream[i:]).turns() == expected, i


def test_sse_extra_keys_merged_first_wins() -> None:
    events = [
        chunk([{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "id": "call_g", "type": "function",
            "function": {"name": "f", "arguments": "{}"},
            "extra_content": {"google": {"thought_signature": "sig1"}},
        }]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "id": "call_g", "type": "function",
            "function": {"name": "f", "arguments": ""},
            "extra_content": {"google": {"thought_signature": "sig2", "more": 1}},
        }]}}]),
    ]
    cap = capture(sse(events))
    call = cap.turns()[0]["tool_calls"][0]
    assert call == {
        "id": "call_g", "type": "function", "function": {"name": "f", "arguments": "{}"},
        "extra_content": {"google": {"thought_signature": "sig1", "more": 1}},
    }
    assert list(call) == ["id", "type", "function", "extra_content"]
    call["extra_content"]["google"]["thought_signature"] = "mutated"  # returned dicts are copies
    assert cap.turns()[0]["tool_calls"][0]["extra_content"]["google"]["thought_signature"] == "sig1"


def test_sse_type_defaults_to_function() -> None:
    events = [chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f"}}]}}])]
    assert capture(sse(events)).turns() == [
        make_turn([{"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}])
    ]


# --- property: random calls -> SSE -> random chunking -> same calls -----------------------------------

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
CALL = st.fixed_dictionaries({
    "id": st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12),
    "name": st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12),
    "arguments": TEXT,
})


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[bytes], list[dict[str, Any]]]:
    calls = draw(st.lists(CALL, min_size=1, max_size=4, unique_by=lambda c: c["id"]))
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    events: list[Any] = [chunk([{"index": 0, "delta": {"role": "assistant", "content": None}}])]
    for i, call in enumerate(calls):
        args = call["arguments"]
        cuts = sorted(draw(st.lists(st.integers(0, len(args)), max_size=4)))
        pieces = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)])]
        events.append(chunk([{"index": 0, "delta": {"tool_calls": [{
            "index": i, "id": call["id"], "type": "function",
            "function": {"name": call["name"], "arguments": pieces[0]},
        }]}}]))
        for piece in pieces[1:]:
            events.append(chunk([{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}}]))
    events += [chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]), chunk([]), "[DONE]"]
    stream = sse(events, eol)
    splits = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *splits], [*splits, len(stream)])]
    expected = [
        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
        for c in calls
    ]
    return chunks, expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_sse_roundtrip_property(case: tuple[list[bytes], list[dict[str, Any]]]) -> None:
    chunks, expected = case
    assert capture(*chunks).turns() == [make_turn(expected)]


# --- OpenRouter's reasoning_details ---------------------------------------------------------------------

DETAILS = [
    {"type": "reasoning.text", "text": "The user wants Paris; call the tool.", "signature": None, "id": None,
     "format": "google-gemini-v1", "index": 0},
    {"type": "reasoning.encrypted", "data": "CiQB0e2Kb7xWq9L+c2ln", "id": "tool_call_a", "format": "google-gemini-v1",
     "index": 0},
]
GEMINI_CALL = {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def test_json_reasoning_details_kept_whole_with_the_calls() -> None:
    message = {"role": "assistant", "content": None, "reasoning": "The user wants Paris; call the tool.",
               "reasoning_details": DETAILS, "tool_calls": [GEMINI_CALL]}
    (turn,) = turns_from_json(completion(message))
    assert turn == make_turn([GEMINI_CALL], None, "The user wants Paris; call the tool.", DETAILS)
    assert orjson.dumps(turn["reasoning_details"]) == orjson.dumps(DETAILS)  # every key, in order


@pytest.mark.parametrize("details", [None, [], "text", {"type": "reasoning.text"}], ids=repr)
def test_json_no_reasoning_details_no_key(details: Any) -> None:
    (turn,) = turns_from_json(completion({"role": "assistant", "tool_calls": [GEMINI_CALL], "reasoning_details": details}))
    assert "reasoning_details" not in turn


def test_json_reasoning_details_are_kept_whole_or_not_at_all() -> None:
    # An entry that is no object, or more entries than a turn keeps: the provider takes only the list it produced.
    for details in ([*DETAILS, "stray"], [DETAILS[0]] * 513):
        (turn,) = turns_from_json(completion({"role": "assistant", "tool_calls": [GEMINI_CALL], "reasoning_details": details}))
        assert "reasoning_details" not in turn and turn["tool_calls"] == [GEMINI_CALL]


def _delta(delta: dict[str, Any]) -> dict[str, Any]:
    return chunk([{"index": 0, "delta": delta, "finish_reason": None}])


#: OpenRouter's stream of a Gemini 3 call: the thought text in pieces, the signature with the call, a repeated key.
OPENROUTER_STREAM = sse([
    _delta({"role": "assistant", "content": "", "reasoning": "The user wants ", "reasoning_details": [
        {"type": "reasoning.text", "text": "The user wants ", "signature": None, "id": None,
         "format": "google-gemini-v1", "index": 0}]}),
    _delta({"reasoning": "Paris; call the tool.", "reasoning_details": [
        {"type": "reasoning.text", "text": "Paris; call ", "format": "google-gemini-v1", "index": 0},
        {"type": "reasoning.text", "text": "the tool.", "format": "other", "index": 0}]}),
    _delta({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}],
            "reasoning_details": [{"type": "reasoning.encrypted", "data": "CiQB0e2Kb7xWq9L+", "id": "tool_call_a",
                                   "format": "google-gemini-v1", "index": 0}]}),
    _delta({"reasoning_details": [{"type": "reasoning.encrypted", "data": "c2ln", "index": 0}]}),
    chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    "[DONE]",
])
OPENROUTER_TURNS = [make_turn([GEMINI_CALL], None, "The user wants Paris; call the tool.", DETAILS)]


def test_sse_reasoning_details_pieces_joined_per_entry() -> None:
    turns = capture(OPENROUTER_STREAM).turns()
    assert turns == OPENROUTER_TURNS
    assert orjson.dumps(turns[0]["reasoning_details"]) == orjson.dumps(DETAILS)


def test_sse_reasoning_details_every_single_split_point() -> None:
    for i in range(len(OPENROUTER_STREAM) + 1):
        assert capture(OPENROUTER_STREAM[:i], OPENROUTER_STREAM[i:]).turns() == OPENROUTER_TURNS, i


def test_sse_reasoning_details_too_many_entries_not_kept() -> None:
    entries = [{"type": "reasoning.text", "text": "t", "index": i} for i in range(513)]
    stream = sse([_delta({"reasoning_details": entries}), _delta({"tool_calls": [{"index": 0, **GEMINI_CALL}]}), "[DONE]"])
    (turn,) = capture(stream).turns()
    assert "reasoning_details" not in turn and turn["tool_calls"] == [GEMINI_CALL]


def test_sse_reasoning_details_returned_are_copies() -> None:
    cap = capture(OPENROUTER_STREAM)
    cap.turns()[0]["reasoning_details"][1]["data"] = "mutated"
    assert cap.turns() == OPENROUTER_TURNS
