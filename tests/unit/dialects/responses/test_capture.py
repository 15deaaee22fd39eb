"""Tests for proxy.dialects.responses: the call item table and the capture of /v1/responses answers (JSON and SSE).

The stream fixtures follow the live event sequence of section 5.4 of docs/provider-rules.md (gpt-5.5): ``.added`` items in
progress, argument/input deltas with ``obfuscation``, ``.done`` items complete, a reasoning blob that differs
between ``.added``, ``.done`` and the terminal ``response.output``.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.dialects.responses.capture import CAPTURE, ResponsesStreamCapture, turns_from_json
from proxy.dialects.responses.items import CALL_TYPES, OUTPUT_TYPE, answers, call_id_of, is_call, is_output, output_type_for
from tests.support.hypothesis_budget import examples

RESP_ID = "resp_0520aa11bb22cc33dd44ee55ff66aa77bb88cc99dd00ee11"
REASONING = {"id": "rs_0520aa", "type": "reasoning", "encrypted_content": "gAAAAAB-done-blob==", "summary": []}
CALL = {"id": "fc_0520bb", "type": "function_call", "status": "completed", "arguments": '{"city":"Paris"}',
        "call_id": "call_ZAbAxxxxxxxxxxxxxxxxxxxx", "name": "get_weather"}
CUSTOM = {"id": "ctc_0520cc", "type": "custom_tool_call", "status": "completed", "call_id": "call_nNNwxxxxxxxxxxxxxxxxxxxx",
          "input": "*** Begin Patch\n*** End Patch\n", "name": "apply_patch"}
MESSAGE = {"id": "msg_0520dd", "type": "message", "status": "completed",
           "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "Checking."}],
           "phase": "commentary", "role": "assistant"}
UNKNOWN = {"id": "zz_1", "type": "future_item", "payload": {"b": 1, "a": [2, 3]}}
ITEMS = [REASONING, MESSAGE, CALL, CUSTOM]


def response(output: list[Any], **extra: Any) -> dict[str, Any]:
    return {"id": RESP_ID, "object": "response", "created_at": 1779557576, "status": "completed", "model": "gpt-5.5",
            "output": output, "usage": {"input_tokens": 31, "output_tokens": 21, "total_tokens": 52}, **extra}


def turn(items: list[dict[str, Any]], response_id: str | None = RESP_ID) -> dict[str, Any]:
    """The remembered turn: recalled by its calls' ids, then its assistant messages' ids, then the response id."""
    ids = [item["call_id"] for item in items if item["type"] in CALL_TYPES]
    ids += [item["id"] for item in items if item["type"] == "message" and item.get("role") == "assistant"]
    return {"dialect": "responses", "ids": ids + ([response_id] if response_id else []), "response_id": response_id,
            "items": items}


# --- items.py -------------------------------------------------------------------------------------------

def test_call_families_and_their_outputs() -> None:
    assert dict(OUTPUT_TYPE) == {
        "function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output",
        "local_shell_call": "local_shell_call_output", "tool_search_call": "tool_search_output",
        "shell_call": "shell_call_output", "apply_patch_call": "apply_patch_call_output",
        "computer_call": "computer_call_output",
    }
    assert output_type_for("custom_tool_call") == "custom_tool_call_output" and output_type_for("message") is None
    assert is_call(CALL) and is_call(CUSTOM) and not is_call(REASONING) and not is_call(MESSAGE) and not is_call("function_call")
    assert is_output({"type": "tool_search_output"}) and not is_output(CALL) and not is_output(None)
    assert answers("function_call_output", "function_call") and not answers("custom_tool_call_output", "function_call")
    # Codex answers a local shell call with a function_call_output; the SDK's own output type answers it too.
    assert answers("function_call_output", "local_shell_call") and answers("local_shell_call_output", "local_shell_call")


def test_call_id_of() -> None:
    assert call_id_of(CALL) == CALL["call_id"]
    assert [call_id_of(x) for x in ({"call_id": ""}, {"call_id": 3}, {"type": "function_call"}, None, "call_x")] == [None] * 5
    # local_shell_call_output has no call_id: its ``id`` is the call's id (openai-python types).
    assert call_id_of({"type": "local_shell_call_output", "id": "call_sh", "output": "{}"}) == "call_sh"
    assert call_id_of({"type": "function_call_output", "id": "fco_1"}) is None


# --- JSON -----------------------------------------------------------------------------------------------

def test_json_keeps_every_output_item_in_order_exactly() -> None:
    output = [REASONING, MESSAGE, CALL, UNKNOWN, CUSTOM]
    turns = turns_from_json(orjson.dumps(response(output)))
    assert turns == [turn(output)]
    assert [list(item) for item in turns[0]["items"]] == [list(item) for item in output]
    assert turns[0]["ids"] == [CALL["call_id"], CUSTOM["call_id"], MESSAGE["id"], RESP_ID]


@pytest.mark.parametrize("call_type", sorted(CALL_TYPES))
def test_json_every_call_family_makes_a_turn(call_type: str) -> None:
    call = {"id": "x_1", "type": call_type, "call_id": "call_1", "status": "completed"}
    assert turns_from_json(orjson.dumps(response([REASONING, call]))) == [turn([REASONING, call])]


def test_json_answers_without_calls_are_remembered_only_for_a_message_made_with_reasoning() -> None:
    # A message's reasoning can be dropped by a filter (RS-5): memory must know the message had some.
    assert turns_from_json(orjson.dumps(response([REASONING, MESSAGE]))) == [turn([REASONING, MESSAGE])]
    assert turns_from_json(orjson.dumps(response([MESSAGE]))) == []
    assert turns_from_json(orjson.dumps(response([REASONING]))) == []
    assert turns_from_json(orjson.dumps(response([]))) == []
    # An output item in an answer (a server-run tool) is not a call.
    assert turns_from_json(orjson.dumps(response([{"type": "function_call_output", "call_id": "c", "output": ""}]))) == []


def test_json_response_id_only_when_a_string() -> None:
    for bad in (None, 7, "", ["resp_1"]):
        body = dict(response([CALL]), id=bad)
        assert turns_from_json(orjson.dumps(body)) == [turn([CALL], None)]
    # A call without a usable call_id is still recalled by the response id, and skipped in ids.
    no_id = dict(CALL, call_id=None)
    assert turns_from_json(orjson.dumps(response([no_id, CUSTOM])))[0]["ids"] == [CUSTOM["call_id"], RESP_ID]
    # Nothing could recall a turn with neither.
    assert turns_from_json(orjson.dumps(dict(response([no_id]), id=None))) == []


def test_json_object_may_be_absent_but_not_another() -> None:
    body = response([CALL])
    del body["object"]
    assert turns_from_json(orjson.dumps(body)) == [turn([CALL])]
    assert turns_from_json(orjson.dumps(dict(body, object="chat.completion"))) == []


def test_json_bom_and_non_object_items() -> None:
    body = b"\xef\xbb\xbf" + orjson.dumps(response([None, 3, "x", [CALL], CALL]))
    assert turns_from_json(body) == [turn([CALL])]


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b"\xff\xfe", b'{"output": [', b"null", b"[]",
                                  b'{"output": {"0": {}}}', b'{"error": {"message": "overloaded"}}'])
def test_json_garbage(body: bytes) -> None:
    assert turns_from_json(body) == []


def test_json_never_raises_on_non_bytes() -> None:
    assert turns_from_json(None) == []  # type: ignore[arg-type]
    assert CAPTURE.from_json(orjson.dumps(response([CALL]))) == [turn([CALL])]


# --- SSE ------------------------------------------------------------------------------------------------

def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def opening(kind: str) -> dict[str, Any]:
    return ev(kind, response={"id": RESP_ID, "object": "response", "status": "in_progress", "store": True, "output": []})


def streamed(item: dict[str, Any], index: int, *, added: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The events of one item: .added in progress, its deltas, .done."""
    at = {"item_id": item["id"], "output_index": index}
    out = [ev("response.output_item.added", item=added or item, output_index=index)]
    if item["type"] == "function_call":
        args = item["arguments"]
        out += [ev("response.function_call_arguments.delta", delta=args[i:i + 4], **at, obfuscation="X7dp3R85")
                for i in range(0, len(args), 4)]
        out.append(ev("response.function_call_arguments.done", arguments=args, **at))
    elif item["type"] == "custom_tool_call":
        out += [ev("response.custom_tool_call_input.delta", delta=item["input"][:9], **at, obfuscation="q"),
                ev("response.custom_tool_call_input.delta", delta=item["input"][9:], **at, obfuscation="w"),
                ev("response.custom_tool_call_input.done", input=item["input"], **at)]
    return [*out, ev("response.output_item.done", item=item, output_index=index)]


FINAL_REASONING = dict(REASONING, encrypted_content="gAAAAAB-completed-blob==")  # the terminal event's blob differs too
EVENTS: list[dict[str, Any]] = [
    opening("response.created"),
    opening("response.in_progress"),
    *streamed(REASONING, 0, added=dict(REASONING, encrypted_content="gAAAAAB-added-blob==")),
    *streamed(CALL, 1, added=dict(CALL, status="in_progress", arguments="")),
    *streamed(CUSTOM, 2, added=dict(CUSTOM, status="in_progress", input="")),
    ev("response.completed", response=response([FINAL_REASONING, CALL, CUSTOM])),
]
for _n, _event in enumerate(EVENTS):
    _event["sequence_number"] = _n
EXPECTED = [turn([REASONING, CALL, CUSTOM])]


def sse(events: list[Any], eol: str = "\n", named: bool = True) -> bytes:
    out = []
    for event in events:
        payload = event if isinstance(event, str) else orjson.dumps(event).decode()
        name = f"event: {event['type']}{eol}" if named and isinstance(event, dict) else ""
        out.append(f"{name}data: {payload}{eol}{eol}")
    return "".join(out).encode()


STREAM = sse(EVENTS)


def capture(*chunks: bytes, max_bytes: int | None = None) -> ResponsesStreamCapture:
    reader = CAPTURE.stream(max_bytes)
    for chunk in chunks:
        reader.feed(chunk)
    return reader


def test_sse_realistic_stream_takes_done_items() -> None:
    reader = capture(STREAM)
    assert reader.turns() == EXPECTED
    items = reader.turns()[0]["items"]
    assert items[0]["encrypted_content"] == "gAAAAAB-done-blob=="  # not .added's, not response.completed's
    assert items[1]["arguments"] == CALL["arguments"] and items[2]["input"] == CUSTOM["input"]
    assert [list(item) for item in items] == [list(REASONING), list(CALL), list(CUSTOM)]
    assert reader.finished and not reader.abandoned


def test_sse_every_single_split_point() -> None:
    for i in range(len(STREAM) + 1):
        assert capture(STREAM[:i], STREAM[i:]).turns() == EXPECTED, i


def test_sse_one_byte_at_a_time() -> None:
    reader = CAPTURE.stream(None)
    for i in range(len(STREAM)):
        reader.feed(STREAM[i:i + 1])
    assert reader.turns() == EXPECTED and reader.finished


@pytest.mark.parametrize("eol", ["\r\n", "\r"])
def test_sse_other_line_endings(eol: str) -> None:
    stream = sse(EVENTS, eol)
    for i in range(0, len(stream) + 1, 7):
        assert capture(stream[:i], stream[i:]).turns() == EXPECTED, i


def test_sse_bom_data_without_space_and_no_event_lines() -> None:
    stream = b"\xef\xbb\xbf" + sse(EVENTS[2:], named=False).replace(b"data: ", b"data:")
    assert capture(stream[:1], stream[1:2], stream[2:]).turns() == [turn([REASONING, CALL, CUSTOM], RESP_ID)]


def test_sse_finished_only_at_the_terminal_event() -> None:
    reader = capture(sse(EVENTS[:-1]))
    assert not reader.finished
    assert reader.turns() == EXPECTED  # every .done arrived: the terminal event adds nothing
    reader.feed(sse(EVENTS[-1:]))
    assert reader.finished


@pytest.mark.parametrize("terminal", [
    ev("response.incomplete", response=response([], status="incomplete")),
    ev("response.failed", response=response([], status="failed", error={"code": "server_error", "message": "boom"})),
    ev("error", code="server_error", message="The server had an error.", param=None, sequence_number=9),
])
def test_sse_other_terminal_events_keep_the_calls_done_before(terminal: dict[str, Any]) -> None:
    reader = capture(sse([*EVENTS[:-1], terminal]))
    assert reader.finished
    assert reader.turns() == EXPECTED


def test_sse_cut_off_keeps_only_items_done() -> None:
    cut = STREAM.index(b'"type":"response.custom_tool_call_input.delta"')
    reader = capture(STREAM[:cut])
    assert reader.turns() == [turn([REASONING, CALL])] and not reader.finished
    # A .done whose blank line never arrived is not counted.
    done = STREAM.index(b"event: response.output_item.done", STREAM.index(b'"type":"response.function_call_arguments.done"'))
    end = STREAM.index(b"\n\n", done)
    assert capture(STREAM[:end + 1]).turns() == []
    assert capture(STREAM[:end + 2]).turns() == [turn([REASONING, CALL])]
    # .added alone (partial arguments) is never remembered.
    assert capture(sse(EVENTS[:6])).turns() == []


def test_sse_falls_back_to_the_terminal_output_for_items_never_done() -> None:
    no_done = [e for e in EVENTS if e["type"] != "response.output_item.done"]
    assert capture(sse(no_done)).turns() == [turn([FINAL_REASONING, CALL, CUSTOM])]
    # Items done win over the terminal event's copies; the others fill their positions.
    only_first = [e for e in EVENTS if e["type"] != "response.output_item.done" or e["output_index"] == 0]
    assert capture(sse(only_first)).turns() == EXPECTED


def test_sse_response_id_from_the_terminal_event_when_created_is_missing() -> None:
    reader = capture(sse(EVENTS[2:]))
    assert reader.turns() == EXPECTED
    reader = capture(sse(EVENTS[2:-1]))
    assert reader.turns() == [turn([REASONING, CALL, CUSTOM], None)]


def test_sse_done_without_output_index_is_appended() -> None:
    events = [opening("response.created"), ev("response.output_item.done", item=REASONING, output_index=0),
              ev("response.output_item.done", item=CALL), ev("response.output_item.done", item=CUSTOM, output_index="2")]
    assert capture(sse(events)).turns() == EXPECTED


def test_sse_max_bytes_abandons() -> None:
    reader = capture(STREAM[:100], STREAM[100:], max_bytes=len(STREAM) - 1)
    assert reader.abandoned and reader.turns() == []
    reader.feed(STREAM)
    assert reader.turns() == [] and not reader.finished
    assert capture(STREAM, max_bytes=len(STREAM)).turns() == EXPECTED


def test_sse_garbage_is_skipped() -> None:
    events: list[Any] = [
        "{not json", "[1, 2]", "null", '"text"',
        ev("response.output_item.done", item="fc_1", output_index=0),
        ev("response.output_item.done", item=None, output_index=1),
        ev("response.created", response="resp_x"),
        ev("response.completed_typo", response=response([CALL])),
        *EVENTS[:-1],
        ev("response.completed", response=dict(response([]), output="nope")),
    ]
    reader = capture(b"random garbage line\n\n", b": keep-alive\n\nid: 7\nretry: 10\n\n", sse(events), b"data: \xff\xfe\n\n")
    reader.feed(None)  # type: ignore[arg-type]
    assert reader.turns() == EXPECTED and reader.finished


def test_sse_turns_are_copies() -> None:
    reader = capture(STREAM)
    first = reader.turns()
    first[0]["items"][1]["arguments"] = "mutated"
    first[0]["items"].clear()
    assert reader.turns() == EXPECTED


def test_sse_text_stream_is_remembered_only_when_made_with_reasoning() -> None:
    reasoned = [opening("response.created"), *streamed(REASONING, 0), *streamed(MESSAGE, 1),
                ev("response.completed", response=response([REASONING, MESSAGE]))]
    reader = capture(sse(reasoned))
    assert reader.turns() == [turn([REASONING, MESSAGE])] and reader.finished
    plain = [opening("response.created"), *streamed(MESSAGE, 0), ev("response.completed", response=response([MESSAGE]))]
    assert capture(sse(plain)).turns() == []
    assert CAPTURE.stream(None).turns() == []


# --- property: random output -> SSE -> random chunking -> the same items ---------------------------------

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
ID = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)


@st.composite
def output_items(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["reasoning", "function_call", "custom_tool_call", "message"]))
        item_id = f"{kind[:2]}_{n}_{draw(ID)}"
        if kind == "reasoning":
            out.append({"id": item_id, "type": kind, "encrypted_content": draw(TEXT), "summary": []})
        elif kind == "message":
            out.append({"id": item_id, "type": kind, "content": [{"type": "output_text", "text": draw(TEXT)}], "role": "assistant"})
        else:
            body = "arguments" if kind == "function_call" else "input"
            out.append({"id": item_id, "type": kind, "status": "completed", body: draw(TEXT), "call_id": f"call_{n}_{draw(ID)}",
                        "name": draw(ID)})
    return out


def remembered(items: list[dict[str, Any]]) -> bool:
    """What capture keeps: an answer with a call, or an assistant message with an id made with reasoning."""
    reasoned = any(item["type"] == "reasoning" for item in items)
    message = any(item["type"] == "message" and item.get("role") == "assistant" and item.get("id") for item in items)
    return any(is_call(item) for item in items) or (reasoned and message)


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[bytes], list[dict[str, Any]]]:
    items = draw(output_items())
    events: list[dict[str, Any]] = [opening("response.created")]
    for index, item in enumerate(items):
        added = copy.deepcopy(item)
        for key in ("arguments", "input", "encrypted_content"):
            if key in added:
                added[key] = added[key][: draw(st.integers(0, len(added[key])))] + "~partial"
        events += streamed(item, index, added=added)
    terminal = draw(st.sampled_from(["response.completed", "response.incomplete", "response.failed"]))
    events.append(ev(terminal, response=response(copy.deepcopy(items))))
    stream = sse(events, draw(st.sampled_from(["\n", "\r\n", "\r"])))
    splits = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *splits], [*splits, len(stream)], strict=True)]
    return chunks, items


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_sse_roundtrip_property(case: tuple[list[bytes], list[dict[str, Any]]]) -> None:
    chunks, items = case
    reader = capture(*chunks)
    assert reader.finished
    assert reader.turns() == ([turn(items)] if remembered(items) else [])
