"""Gemini's answers read into remembered turns (``proxy/dialects/gemini/capture.py``): a ``GenerateContentResponse``
body, and ``streamGenerateContent`` as server-sent events or one JSON array, fed in pieces of every size."""

import orjson
import pytest

from proxy.dialects.capture import MAX_ENTRIES
from proxy.dialects.gemini.capture import CAPTURE, GeminiStream, turns_from_json
from proxy.dialects.gemini.keys import turn_ids

SIGNATURE = "c2lnbmF0dXJlLW9mLWNhbGwtMQ=="
LATER = "bGF0ZXItc2lnbmF0dXJl"
#: A Gemini 3 answer calling two functions in parallel, as its final content has them: the thought first, the
#: signature on the first call only.
PARTS = [
    {"text": "Planning the lookups.", "thought": True},
    {"functionCall": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SIGNATURE},
    {"functionCall": {"id": "c2", "name": "get_weather", "args": {"city": "Tokyo"}}},
]


def response(parts, finish=False, index=0):
    candidate = {"content": {"role": "model", "parts": parts}, "index": index}
    if finish:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "modelVersion": "gemini-3-pro-preview"}


#: The same answer streamed: the thought in two deltas, each call in its own chunk, an empty last chunk.
CHUNKS = [
    response([{"text": "Planning ", "thought": True}]),
    response([{"text": "the lookups.", "thought": True}]),
    response([PARTS[1]]),
    response([PARTS[2]]),
    response([], finish=True),
]


def sse(chunks):
    return b"".join(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n" for chunk in chunks)


def array(chunks):
    return b"[" + b"\n,\r\n".join(orjson.dumps(chunk, option=orjson.OPT_INDENT_2) for chunk in chunks) + b"]"


def read(raw, size):
    reader = GeminiStream()
    for start in range(0, len(raw), size):
        reader.feed(raw[start:start + size])
    return reader


def test_a_json_answer_is_one_turn_with_every_part_as_sent():
    turns = turns_from_json(orjson.dumps(response(PARTS, finish=True)))
    assert turns == [{"dialect": "gemini", "ids": turn_ids(PARTS), "parts": PARTS}]
    assert turns[0]["ids"][0] == "c1"


def test_an_answer_without_a_call_is_not_remembered():
    assert turns_from_json(orjson.dumps(response([{"text": "Hi.", "thoughtSignature": SIGNATURE}]))) == []


@pytest.mark.parametrize("shape", [sse, array])
@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
def test_a_stream_in_either_shape_is_the_final_content(shape, size):
    reader = read(shape(CHUNKS), size)
    assert reader.turns() == [{"dialect": "gemini", "ids": turn_ids(PARTS), "parts": PARTS}]


def test_the_array_stream_finishes_when_it_closes_and_an_event_stream_at_its_end_only():
    raw = array(CHUNKS)
    reader = read(raw[:-1], 10)
    assert not reader.finished
    reader.feed(raw[-1:])
    assert reader.finished
    assert not read(sse(CHUNKS), 10).finished


def test_strings_with_brackets_quotes_and_escapes_do_not_split_the_array():
    tricky = {"functionCall": {"name": "run", "args": {"command": 'echo "}]" \\\\ [{ \\"'}}}
    raw = array([response([tricky], finish=True)])
    for size in (1, 3, len(raw)):
        assert read(raw, size).turns()[0]["parts"] == [tricky]


def test_a_signature_sent_later_on_empty_text_joins_the_text_it_ends():
    chunks = [response([PARTS[1]]), response([{"text": "Done"}]), response([{"text": "."}]),
              response([{"text": "", "thoughtSignature": LATER}], finish=True)]
    parts = read(sse(chunks), 5).turns()[0]["parts"]
    assert parts == [PARTS[1], {"text": "Done.", "thoughtSignature": LATER}]


def test_a_call_split_across_chunks_is_one_call_again():
    chunks = [response([{"functionCall": {"name": "get_weather", "args": {}}, "thoughtSignature": SIGNATURE}]),
              response([{"functionCall": {"args": {"city": "Paris"}}}], finish=True)]
    parts = read(sse(chunks), 9).turns()[0]["parts"]
    assert parts == [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SIGNATURE}]


def test_a_stream_holds_at_most_max_entries_parts():
    calls = [{"functionCall": {"name": f"f{i}", "args": {}}} for i in range(MAX_ENTRIES + 5)]
    reader = read(sse([response([call]) for call in calls]), 4096)
    assert len(reader.turns()[0]["parts"]) == MAX_ENTRIES
    assert reader.cut.entries == 5


def test_past_max_bytes_the_reader_gives_up():
    reader = CAPTURE.stream(100)
    reader.feed(array(CHUNKS))
    assert reader.abandoned and reader.turns() == []
