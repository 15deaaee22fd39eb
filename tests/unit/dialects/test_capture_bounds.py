"""What one remembered turn may hold (issue 23): an upstream's answer padded with junk (empty objects by the
hundred thousand, blocks past any turn's size, input nested past any call's) is remembered as its turn alone (in
every store: tests/system/dialects/test_capture_bounds.py); an answer too dense to be a turn is not parsed at all; large answers and events are parsed beside the
event loop; the recall view reads no more than a turn keeps; the choices of one answer keep no more than one turn
may; a small request that recalls large turns is repaired beside the event loop; and what was left out is counted
and logged."""

import asyncio
import threading
import tracemalloc
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import respx

import proxy.dialects.responses.capture
import proxy.dialects.sse
import proxy.endpoint
from proxy.dialects.capture import LARGE_ANSWER_BYTES, MAX_DEPTH, MAX_ENTRIES, MAX_PARTS, MAX_READ_VALUES, MAX_TURNS, MAX_VALUES, Cut
from proxy.dialects.capture import ReadAside
from proxy.dialects.chat.capture import StreamCapture
from proxy.dialects.chat.capture import turns_from_json as chat_turns
from proxy.dialects.messages.capture import MessagesStreamCapture
from proxy.dialects.messages.capture import turns_from_json as messages_turns
from proxy.dialects.messages.view import view_turn as messages_view
from proxy.dialects.responses.capture import ResponsesStreamCapture
from proxy.dialects.responses.capture import turns_from_json as responses_turns
from proxy.dialects.responses.view import view_turn as responses_view
from proxy.turns import make_turn
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import AUTH, DONE, UPSTREAM, ScriptedStream, call, chunk, completion, delta, event, make_settings
from tests.support.proxy_fixtures import orphan_history, running_proxy, sse_response, tenant_for
from tests.unit.dialects.test_capture_limit import abandoned

#: Empty objects beside the call: more than LARGE_ANSWER_BYTES of them, fewer values than MAX_READ_VALUES.
PADDING = 25_000
#: Empty objects past MAX_READ_VALUES: an answer no turn could be.
DENSE = MAX_READ_VALUES + 1_000
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_pad", "name": "weather", "arguments": "{}"}
TOOL_USE = {"type": "tool_use", "id": "toolu_pad", "name": "weather", "input": {"city": "Paris"}}
PATHS = {"responses": "/v1/responses", "messages": "/v1/messages", "chat": "/v1/chat/completions"}
ASKED = {"responses": {"model": "m", "input": "Weather?"},
         "messages": {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Weather?"}]},
         "chat": {"model": "m", "messages": [{"role": "user", "content": "Weather?"}]}}


def padded_response(padding: int) -> dict[str, Any]:
    return {"id": "resp_pad", "object": "response", "status": "completed", "output": [CALL, *[{}] * padding]}


def padded_answer(dialect: str, padding: int) -> bytes:
    if dialect == "responses":
        return orjson.dumps(padded_response(padding))
    if dialect == "messages":
        return orjson.dumps({"id": "msg_pad", "type": "message", "role": "assistant", "content": [TOOL_USE, *[{}] * padding]})
    return orjson.dumps(completion([call("call_pad"), *[{}] * padding]))


def remembered_entries(dialect: str, turns: dict[str, Any]) -> list[Any]:
    (turn,) = {id(turn): turn for turn in turns.values()}.values()
    return turn[{"responses": "items", "messages": "blocks", "chat": "tool_calls"}[dialect]]


def scope(dialect: str) -> str:
    return tenant_for() if dialect == "chat" else f"{tenant_for()}/{dialect}"


def padded_stream(padding: int) -> list[bytes]:
    """A Responses stream whose call comes done, then a ``response.completed`` carrying it and ``padding`` empty objects."""
    return [event({"type": "response.created", "response": {"id": "resp_pad", "object": "response", "output": []}}),
            event({"type": "response.output_item.done", "output_index": 0, "item": CALL}),
            event({"type": "response.completed", "response": padded_response(padding)})]


@pytest.mark.parametrize("dialect", ["responses", "messages", "chat"])
async def test_a_padded_json_answer_is_remembered_as_its_turn_alone(dialect: str) -> None:
    answer = padded_answer(dialect, PADDING)
    assert len(answer) > LARGE_ANSWER_BYTES
    with respx.mock(base_url=UPSTREAM) as upstream:
        route = upstream.post(PATHS[dialect].removeprefix("/v1"))
        route.mock(return_value=httpx.Response(200, content=answer, headers={"content-type": "application/json"}))
        async with running_proxy(make_settings(memory="memory://")) as proxy:
            response = await proxy.client.post(PATHS[dialect], json=ASKED[dialect], headers=AUTH)
            assert response.status_code == 200 and response.content == answer
            found = await proxy.state.store.recall(scope(dialect), ["call_pad", "toolu_pad"])
            metrics = (await proxy.client.get("/metrics")).text
    assert len(remembered_entries(dialect, found)) == 1
    assert abandoned(metrics, "bounds") == 1


def parses_on(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[tuple[int, int]]:
    """Record (size, thread) of every parse through ``owner.name``."""
    parses: list[tuple[int, int]] = []
    original = getattr(owner, name)

    def recording(raw: Any) -> Any:
        parses.append((len(raw), threading.get_ident()))
        return original(raw)

    monkeypatch.setattr(owner, name, recording)
    return parses


async def test_a_large_json_answer_is_parsed_beside_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = padded_answer("chat", PADDING)
    parses = parses_on(monkeypatch, orjson, "loads")
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post("/chat/completions").mock(return_value=httpx.Response(200, content=answer,
                                                                            headers={"content-type": "application/json"}))
        async with running_proxy(make_settings(memory="memory://")) as proxy:
            assert (await proxy.client.post(PATHS["chat"], json=ASKED["chat"], headers=AUTH)).status_code == 200
    threads = {thread for size, thread in parses if size == len(answer)}
    assert threads and threading.get_ident() not in threads


async def test_a_large_event_is_parsed_beside_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = padded_stream(PADDING)
    parses = parses_on(monkeypatch, proxy.dialects.sse, "_loads")
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post("/responses").mock(return_value=sse_response(ScriptedStream(parts)))
        async with running_proxy(make_settings(memory="memory://")) as running:
            response = await running.client.post(PATHS["responses"], json={**ASKED["responses"], "stream": True}, headers=AUTH)
            assert response.status_code == 200
            assert await running.state.store.recall(scope("responses"), ["call_pad"])
    large = {thread for size, thread in parses if size > LARGE_ANSWER_BYTES}
    small = {thread for size, thread in parses if size <= LARGE_ANSWER_BYTES}
    assert large and threading.get_ident() not in large
    assert small == {threading.get_ident()}  # the small events are read as they come, on the loop


async def test_the_turn_of_a_large_stream_is_made_beside_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Making it walks and copies all it keeps (``bounded``)."""
    made: list[int] = []
    original = proxy.dialects.responses.capture.bounded

    def recording(*args: Any) -> Any:
        made.append(threading.get_ident())
        return original(*args)

    monkeypatch.setattr(proxy.dialects.responses.capture, "bounded", recording)
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post("/responses").mock(return_value=sse_response(ScriptedStream(padded_stream(PADDING))))
        async with running_proxy(make_settings(memory="memory://")) as running:
            response = await running.client.post(PATHS["responses"], json={**ASKED["responses"], "stream": True}, headers=AUTH)
            assert response.status_code == 200
            assert await running.state.store.recall(scope("responses"), ["call_pad"])
    assert made and threading.get_ident() not in made


def peak_while(function: Any, *args: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = function(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("read", [responses_turns, messages_turns, chat_turns])
def test_a_json_answer_too_dense_to_be_a_turn_is_not_parsed(read: Any) -> None:
    dialect = {responses_turns: "responses", messages_turns: "messages", chat_turns: "chat"}[read]
    answer = padded_answer(dialect, DENSE)
    turns, peak = peak_while(read, answer)
    assert turns == []
    assert peak < len(answer)  # not the tens of megabytes its objects would take


@pytest.mark.parametrize("reader", [ResponsesStreamCapture, MessagesStreamCapture, StreamCapture])
def test_an_event_too_dense_to_be_part_of_a_turn_is_not_parsed(reader: Any) -> None:
    capture = reader()
    dense = event({"type": "response.completed", "response": padded_response(DENSE)})
    _, peak = peak_while(capture.feed, dense)
    assert peak < 3 * len(dense)  # its line and data copied by the framing, not the megabytes of its objects
    assert capture.cut.entries == 1


def test_a_messages_block_whose_input_came_in_a_delta_too_dense_to_read_is_not_remembered() -> None:
    """Its input is not what the model chose without that delta: the block is dropped, never kept with ``{}``."""
    capture = MessagesStreamCapture()
    partial = '{"a": [' + ",".join(["{}"] * DENSE) + "]}"
    for obj in ({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}},
                {"type": "content_block_start", "index": 0, "content_block": {**TOOL_USE, "input": {}}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": partial}},
                {"type": "content_block_stop", "index": 0}, {"type": "message_stop"}):
        capture.feed(event(obj))
    assert capture.turns() == [] and capture.finished


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_turn_keeps_its_first_blocks_within_depth_and_values() -> None:
    text = [{"type": "text", "text": f"t{n}"} for n in range(MAX_ENTRIES)]
    (turn,) = messages_turns(orjson.dumps({"type": "message", "role": "assistant", "content": [TOOL_USE, *text]}))
    assert turn["blocks"] == [TOOL_USE, *text[:-1]]
    deep = {**TOOL_USE, "id": "toolu_deep", "input": nested(MAX_DEPTH)}
    wide = {**TOOL_USE, "id": "toolu_wide", "input": {"rows": [0] * MAX_VALUES}}
    cut = Cut()
    body = orjson.dumps({"type": "message", "role": "assistant", "content": [TOOL_USE, deep, *text[:10], wide, *text]})
    (turn,) = messages_turns(body, cut)
    # Past the values a turn keeps, the walk stops: the blocks after the wide one are left out with it.
    assert turn["ids"] == ["toolu_pad"] and turn["blocks"] == [TOOL_USE, *text[:10]]
    assert cut.entries == 2 + len(text)


def test_a_streamed_choice_keeps_its_first_calls() -> None:
    capture = StreamCapture()
    for n in range(MAX_ENTRIES + 100):
        capture.feed(event(chunk([delta(tool_calls=[{"index": n, "id": f"call_{n}", "type": "function",
                                                      "function": {"name": "f", "arguments": "{}"}}])])))
    (turn,) = capture.turns()
    assert [c["id"] for c in turn["tool_calls"]] == [f"call_{n}" for n in range(MAX_ENTRIES)]
    assert capture.cut.entries == 100


def counted(items: list[Any], read: list[int]) -> Iterator[Any]:
    for item in items:
        read[0] += 1
        yield item


@pytest.mark.parametrize(("view", "key", "first"), [(responses_view, "items", CALL), (messages_view, "blocks", TOOL_USE)])
def test_the_recall_view_reads_no_more_of_a_stored_turn_than_a_turn_keeps(view: Any, key: str, first: Any) -> None:
    """A store may hold a turn remembered before these bounds: recalling it costs no more than a bounded one."""
    read = [0]
    stored = [first, *[{"type": "message", "role": "assistant", "content": []}] * (10 * MAX_ENTRIES)]
    viewed = view({key: counted(stored, read)})
    assert len(viewed["tool_calls"]) == 1
    assert read[0] == MAX_ENTRIES


def test_a_chat_call_whose_chunk_was_too_dense_to_read_is_not_remembered() -> None:
    """That chunk may have carried a piece of its arguments: the call is dropped, never kept with what is left."""
    capture = StreamCapture()
    start = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": '}}
    capture.feed(event(chunk([delta(tool_calls=[start])])))
    capture.feed(event(chunk([delta(tool_calls=[{"index": 0, "function": {"arguments": "1"}, "padding": [{}] * DENSE}])])))
    capture.feed(event(chunk([delta(tool_calls=[{"index": 0, "function": {"arguments": "}"}}])])))
    assert capture.turns() == [] and capture.cut.entries == 2


class HeldRead(ResponsesStreamCapture):
    """Its held events are read once ``release`` is set; ``started`` says the read began."""

    __slots__ = ("release", "started")

    def __init__(self) -> None:
        super().__init__()
        self.release, self.started = threading.Event(), threading.Event()

    def read_held(self) -> None:
        self.started.set()
        self.release.wait(HANG_GUARD)
        super().read_held()


async def test_a_relay_stopped_while_a_thread_reads_its_stream_gets_no_turns_from_it() -> None:
    """The thread may still be making them: the relay's last look (``turns``) must not race it."""
    reader = HeldRead()
    aside = ReadAside(reader)
    parts = padded_stream(PADDING)
    body = aside.body(ScriptedStream(parts))
    assert await anext(body) == parts[0]
    assert await anext(body) == parts[1]
    reading = asyncio.create_task(anext(body))  # the large event: read in the thread
    assert await asyncio.to_thread(reader.started.wait, HANG_GUARD)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert aside.turns() == []
    reader.release.set()


def test_a_streamed_text_block_gathers_at_most_max_parts_citations() -> None:
    capture = MessagesStreamCapture()
    citation = {"type": "char_location", "cited_text": "x", "document_index": 0, "start_char_index": 0, "end_char_index": 1}
    capture.feed(event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
    for _ in range(MAX_PARTS + 100):
        capture.feed(event({"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": citation}}))
    capture.feed(event({"type": "content_block_stop", "index": 0}))
    capture.feed(event({"type": "content_block_start", "index": 1, "content_block": TOOL_USE}))
    capture.feed(event({"type": "content_block_stop", "index": 1}))
    (turn,) = capture.turns()
    assert len(turn["blocks"][0]["citations"]) == MAX_PARTS


def many_choices(stream: bool) -> httpx.Response:
    """A chat answer of MAX_TURNS choices of one call fewer than MAX_ENTRIES each: as a stream, one event a choice; as
    JSON, calls of an id alone, to stay under what is ``too_dense`` to read."""
    def calls(choice: int) -> list[dict[str, Any]]:
        return [{"index": n, "id": f"c{choice}_{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                if stream else {"id": f"c{choice}_{n}"} for n in range(MAX_ENTRIES - 1)]

    if stream:
        events = [event(chunk([delta(choice, tool_calls=calls(choice))])) for choice in range(MAX_TURNS)]
        return sse_response(ScriptedStream([*events, DONE]))
    return httpx.Response(200, json=completion(*(calls(choice) for choice in range(MAX_TURNS))))


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_the_choices_of_one_chat_answer_keep_max_entries_calls_in_all(stream: bool) -> None:
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post("/chat/completions").mock(return_value=many_choices(stream))
        async with running_proxy(make_settings(memory="memory://")) as running:
            response = await running.client.post(PATHS["chat"], json={**ASKED["chat"], "stream": stream}, headers=AUTH)
            assert response.status_code == 200
            ids = [f"c{choice}_{n}" for choice in range(MAX_TURNS) for n in range(MAX_ENTRIES - 1)]
            found = await running.state.store.recall(scope("chat"), ids)
            metrics = (await running.client.get("/metrics")).text
    turns = {id(turn): turn for turn in found.values()}.values()
    assert sum(len(turn["tool_calls"]) for turn in turns) == MAX_ENTRIES
    assert [len(turn["tool_calls"]) for turn in turns] == [MAX_ENTRIES - 1, 1]  # the first choices, whole but the last
    assert abandoned(metrics, "bounds") == 1


@pytest.mark.parametrize("entries", [1, MAX_ENTRIES])
async def test_a_small_request_that_recalls_large_turns_is_repaired_beside_the_event_loop(
        monkeypatch: pytest.MonkeyPatch, entries: int) -> None:
    """The repair views and puts back every entry of the turns it recalls: their size weighs as the body's does."""
    repairs: list[int] = []
    original = proxy.endpoint._repaired

    def recording(*args: Any) -> Any:
        repairs.append(threading.get_ident())
        return original(*args)

    monkeypatch.setattr(proxy.endpoint, "_repaired", recording)
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post("/chat/completions").mock(return_value=httpx.Response(200, json=completion()))
        async with running_proxy(make_settings(memory="memory://")) as running:
            await running.state.store.remember(scope("chat"), [make_turn([call(f"call_{n}") for n in range(entries)])])
            body = {"model": "m", "messages": orphan_history("call_0")}
            response = await running.client.post(PATHS["chat"], json=body, headers=AUTH)
    assert response.status_code == 200 and response.headers["x-toolmend-repairs"].startswith("TM101=1")
    assert len(orjson.dumps(body)) < LARGE_ANSWER_BYTES
    on_loop = repairs == [threading.get_ident()]
    assert len(repairs) == 1 and on_loop == (entries == 1)
