"""The response path: upstream answers relayed unchanged, event streams chunk by chunk, tool calls captured."""

import asyncio
import gzip

import anyio
import httpx
import orjson
import pytest

from proxy.dialects.capture import CaptureLimit, Cut
from proxy.relay import relay_answer
from proxy.turns import make_turn
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import (
    AUTH,
    DONE,
    AsgiCall,
    ScriptedStream,
    build_app,
    call,
    call_asgi,
    chunk,
    delta,
    event,
    running_proxy,
    sse_response,
    started,
    tenant_for,
)

PATH = "/v1/chat/completions"
BODY = orjson.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}]})
HEADERS = [(b"authorization", AUTH["authorization"].encode()), (b"content-type", b"application/json")]


def serve_stream(upstream, stream: ScriptedStream, status: int = 200, headers: dict[str, str] | None = None):
    return upstream.post("/chat/completions").mock(side_effect=lambda request: sse_response(stream, status, headers))


def split_call_stream() -> list[bytes]:
    """Two parallel calls whose ids, names and argument text arrive in pieces, with network chunks that
    cut events (and even a line) in half, then a usage-only chunk and [DONE]."""
    events = b"".join([
        event(chunk([delta(role="assistant", content="Let me ")])),
        event(chunk([delta(content="check.")])),
        event(chunk([delta(tool_calls=[{"index": 0, "id": "call_A1", "type": "function", "function": {"name": "weather", "arguments": ""}}])])),
        event(chunk([delta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": '}}])])),
        event(chunk([delta(tool_calls=[{"index": 1, "id": "call_B2", "type": "function", "function": {"name": "time", "arguments": '{"tz"'}}])])),
        event(chunk([delta(tool_calls=[{"index": 0, "function": {"arguments": '"Paris"}'}}])])),
        event(chunk([delta(tool_calls=[{"index": 1, "function": {"arguments": ': "CET"}'}}])])),
        event(chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])),
        event(chunk([], usage={"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14})),
        DONE,
    ])
    return [events[i:i + 37] for i in range(0, len(events), 37)]


async def test_stream_is_relayed_unchanged_and_its_split_calls_remembered(upstream):
    parts = split_call_stream()
    serve_stream(upstream, ScriptedStream(parts), headers={"x-request-id": "req_s1", "openai-processing-ms": "3"})
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, content=BODY, headers=AUTH)
        found = await proxy.state.store.recall(tenant_for(), ["call_B2"])
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-request-id"] == "req_s1"
    assert response.content == b"".join(parts)
    turn = found["call_B2"]
    assert turn["tool_calls"] == [
        {"id": "call_A1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_B2", "type": "function", "function": {"name": "time", "arguments": '{"tz": "CET"}'}},
    ]
    assert turn["content"] == "Let me check."


async def test_stream_with_several_choices_remembers_one_turn_per_choice(upstream):
    events = [
        event(chunk([delta(0, tool_calls=[{"index": 0, "id": "call_c0", "type": "function", "function": {"name": "a", "arguments": "{}"}}]),
                     delta(1, tool_calls=[{"index": 0, "id": "call_c1", "type": "function", "function": {"name": "b", "arguments": "{"}}])])),
        event(chunk([delta(1, tool_calls=[{"index": 0, "function": {"arguments": "}"}}])])),
        event(chunk([delta(2, content="no tools here")])),
        DONE,
    ]
    serve_stream(upstream, ScriptedStream(events))
    async with running_proxy() as proxy:
        await proxy.client.post(PATH, content=BODY, headers=AUTH)
        assert len(proxy.state.store.store) == 2
        found = await proxy.state.store.recall(tenant_for(), ["call_c0", "call_c1"])
    assert found["call_c0"]["tool_calls"] == [{"id": "call_c0", "type": "function", "function": {"name": "a", "arguments": "{}"}}]
    assert found["call_c1"]["tool_calls"] == [{"id": "call_c1", "type": "function", "function": {"name": "b", "arguments": "{}"}}]


async def test_stream_goes_out_chunk_by_chunk_as_it_arrives(upstream):
    gates = [anyio.Event(), anyio.Event()]
    parts = [event(chunk([delta(content="a")])), gates[0], event(chunk([delta(content="b")])), gates[1], DONE]
    stream = ScriptedStream(parts)
    serve_stream(upstream, stream)
    asgi = AsgiCall()

    async def on_send(message):
        # The upstream sends its next piece only once the previous one reached the client: a proxy that
        # buffered would wait forever here.
        sent = len(asgi.body_chunks)
        if message["type"] == "http.response.body" and message.get("body") and sent <= len(gates):
            gates[sent - 1].set()

    asgi.on_send = on_send
    async with started(build_app()) as app:
        with anyio.fail_after(HANG_GUARD):
            await call_asgi(app, asgi, "POST", PATH, HEADERS, [BODY])
    assert asgi.status == 200
    assert asgi.body_chunks == [p for p in parts if isinstance(p, bytes)]
    assert asgi.finished


async def test_client_disconnect_closes_a_never_ending_upstream_stream_promptly(upstream):
    stream = ScriptedStream([event(chunk([delta(tool_calls=[{"index": 0, "id": "call_hang", "function": {"name": "x"}}])]))], hang=True)
    serve_stream(upstream, stream)
    asgi = AsgiCall()

    async def on_send(message):
        if message["type"] == "http.response.body" and message.get("body"):
            asgi.disconnect.set()  # the client reads one chunk and goes away

    asgi.on_send = on_send
    async with running_proxy() as proxy:
        with anyio.fail_after(HANG_GUARD):  # the stream never ends: only the disconnect can close it
            await call_asgi(proxy.app, asgi, "POST", PATH, HEADERS, [BODY])
            await stream.closed.wait()
        assert not asgi.finished
        # The client saw the call id before it left, so the call is remembered for a later orphan result.
        assert list(await proxy.state.store.recall(tenant_for(), ["call_hang"])) == ["call_hang"]


def cut_stream() -> ScriptedStream:
    return ScriptedStream([
        event(chunk([delta(tool_calls=[{"index": 0, "id": "call_cut", "type": "function", "function": {"name": "weather", "arguments": '{"ci'}}])])),
        b'data: {"choices": [{"index": 0, "delta": {"tool_ca',
        httpx.RemoteProtocolError("peer closed connection without sending complete message body"),
    ])


async def test_stream_cut_off_in_the_middle_ends_the_relay_and_closes_upstream(upstream, caplog):
    stream = cut_stream()
    serve_stream(upstream, stream)
    asgi = AsgiCall()
    async with started(build_app()) as app:
        with anyio.fail_after(HANG_GUARD):
            await call_asgi(app, asgi, "POST", PATH, HEADERS, [BODY])
    assert asgi.status == 200
    # What arrived went out unchanged; the body is left unterminated so the client sees the truncation.
    assert b"".join(asgi.body_chunks) == b"".join(i for i in stream.items if isinstance(i, bytes))
    assert not asgi.finished
    assert stream.closed.is_set()
    assert "RemoteProtocolError" in caplog.text


@pytest.mark.parametrize("path, shape", [("/v1/messages", {"type", "error"}), (PATH, {"error"})])
async def test_a_json_answer_cut_off_is_a_502_in_the_request_s_shape_and_counted(upstream, path, shape):
    cut = ScriptedStream([b'{"id": "msg_1", "content": [{"type": "tool_u', httpx.RemoteProtocolError("peer closed connection")])
    upstream.post(path.removeprefix("/v1")).mock(return_value=httpx.Response(200, headers={"content-type": "application/json"}, stream=cut))
    async with running_proxy() as proxy:
        response = await proxy.client.post(path, json={"messages": [{"role": "user", "content": "q"}]}, headers=AUTH)
        counted = proxy.state.metrics.upstream_errors.labels("upstream_unreachable")._value.get()
    assert response.status_code == 502 and set(response.json()) == shape
    assert cut.closed.is_set()
    assert counted == 1


async def test_calls_streamed_before_a_cut_off_are_remembered(upstream):
    serve_stream(upstream, cut_stream())
    async with running_proxy() as proxy:
        asgi = AsgiCall()
        await call_asgi(proxy.app, asgi, "POST", PATH, HEADERS, [BODY])
        found = await proxy.state.store.recall(tenant_for(), ["call_cut"])
    assert found["call_cut"]["tool_calls"][0]["id"] == "call_cut"


@pytest.mark.parametrize("status", [400, 429, 500])
async def test_error_answer_is_streamed_through_unchanged_and_not_remembered(upstream, status):
    raw = event(chunk([delta(tool_calls=[{"index": 0, "id": "call_err", "type": "function", "function": {"name": "x", "arguments": "{}"}}])]))
    serve_stream(upstream, ScriptedStream([raw]), status=status, headers={"retry-after": "3"})
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, content=BODY, headers=AUTH)
        assert await proxy.state.store.recall(tenant_for(), ["call_err"]) == {}
    assert response.status_code == status
    assert response.headers["retry-after"] == "3"
    assert response.content == raw


async def test_compressed_answer_is_relayed_as_received(upstream):
    raw = gzip.compress(orjson.dumps({"choices": [{"message": {"tool_calls": [{"id": "call_gz", "type": "function",
                                                                               "function": {"name": "x", "arguments": "{}"}}]}}]}))
    upstream.post("/chat/completions").mock(return_value=httpx.Response(
        200, content=raw, headers={"content-type": "application/json", "content-encoding": "gzip"}))
    async with running_proxy() as proxy:
        async with proxy.client.stream("POST", PATH, content=BODY, headers=AUTH) as response:
            received = b"".join([part async for part in response.aiter_raw()])
    assert response.headers["content-encoding"] == "gzip"
    assert received == raw


async def test_repaired_streaming_request_carries_the_repairs_header(upstream):
    serve_stream(upstream, ScriptedStream([event(chunk([delta(content="ok")])), DONE]))
    body = {"stream": True, "messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "call_x", "content": "r"}]}
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=body, headers=AUTH)
    assert response.headers["x-toolmend-repairs"] == "TM101=1"
    assert response.headers["content-type"] == "text/event-stream"


FORGED = {"x-toolmend-repairs": "TM999=9", "x-toolmend-calls": "recalled=9,synthesized=0", "x-toolmend-memory": "unavailable",
          "x-toolmend-request-id": "forged-id", "X-Toolmend-Anything": "forged"}
REPAIRED = {"messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "call_x", "content": "r"}]}


@pytest.mark.parametrize("path, body, answer", [
    ("/v1/models", None, httpx.Response(200, json={"data": []}, headers=FORGED)),
    (PATH, REPAIRED, httpx.Response(200, json={"choices": []}, headers=FORGED)),
    (PATH, {**REPAIRED, "stream": True}, sse_response(ScriptedStream([DONE]), headers=FORGED)),
    (PATH, REPAIRED, httpx.Response(500, json={"error": {"message": "boom"}}, headers=FORGED)),
], ids=["pass-through", "repaired", "stream", "upstream-error"])
async def test_an_upstream_cannot_forge_toolmend_s_own_headers(upstream, path, body, answer):
    upstream.route(path=path.removeprefix("/v1")).mock(return_value=answer)
    async with running_proxy() as proxy:
        if body is None:
            response = await proxy.client.get(path, headers={**AUTH, "x-request-id": "req-mine"})
        else:
            response = await proxy.client.post(path, json=body, headers={**AUTH, "x-request-id": "req-mine"})
    own = {name: response.headers.get_list(name) for name in response.headers if name.startswith("x-toolmend-")}
    expected = {"x-toolmend-request-id": ["req-mine"]}
    if body is not None:
        expected["x-toolmend-repairs"] = ["TM101=1"]
        expected["x-toolmend-calls"] = ["recalled=0,synthesized=1"]
    assert own == expected


class ReaderOf:
    """Any dialect's stream reader, for the relay alone: the stream is finished once ``terminal`` was fed, and
    what it read is one turn."""

    abandoned = False
    cut = Cut()

    def __init__(self, terminal: bytes | None) -> None:
        self.terminal = terminal
        self.fed: list[bytes] = []

    @property
    def finished(self) -> bool:
        return self.terminal is not None and self.terminal in self.fed

    def feed(self, chunk: bytes) -> None:
        self.fed.append(chunk)

    def feed_aside(self, chunk: bytes) -> bool:
        self.feed(chunk)
        return False

    def read_held(self) -> None:
        pass

    def turns(self):
        return [make_turn([call("call_any")])]


class CaptureOf:
    def __init__(self, terminal: bytes | None) -> None:
        self.terminal = terminal

    def from_json(self, body: bytes, cut: Cut | None = None):
        return []

    def stream(self, max_bytes: int | None) -> ReaderOf:
        return ReaderOf(self.terminal)


async def relay_until_remembered(parts: list[bytes], terminal: bytes | None) -> tuple[list[list[bytes]], AsgiCall]:
    """Relay ``parts`` as an event stream through ``relay_answer``; what the client had received, and whether the
    body was finished, when ``remember`` was called (which returns only once the relay waited on it)."""
    answer = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=ScriptedStream(parts))
    asgi = AsgiCall()
    seen: list[list[bytes]] = []
    relaying: list[asyncio.Task | None] = []

    async def remember(turns) -> None:
        assert turns == [make_turn([call("call_any")])]
        seen.append(list(asgi.body_chunks))
        assert not asgi.finished
        # Awaited by the relay's own task, which therefore sends nothing more until this returns.
        assert asyncio.current_task() is relaying[0]

    async def send(message) -> None:
        asgi.sent.append(message)

    relay = await relay_answer(answer, CaptureOf(terminal), remember, CaptureLimit(1 << 20, lambda reason: None))
    relaying.append(asyncio.current_task())
    with anyio.fail_after(HANG_GUARD):
        await relay({"type": "http"}, anyio.sleep_forever, send)
    return seen, asgi


async def test_only_the_chunk_that_finishes_a_stream_waits_for_its_turns_to_be_remembered():
    # Protocol-neutral: the dialect's reader says which chunk is the terminal one (here the second of four).
    parts = [b"event: a\n\n", b"event: stop\n\n", b": after the end\n\n", b": more\n\n"]
    seen, asgi = await relay_until_remembered(parts, terminal=b"event: stop\n\n")
    assert seen == [[b"event: a\n\n"]]  # remembered once, before the terminal chunk and after every chunk before it
    assert asgi.body_chunks == parts and asgi.finished


async def test_a_stream_without_a_terminal_event_ends_only_once_its_turns_are_remembered():
    parts = [b"event: a\n\n", b"event: b\n\n"]
    seen, asgi = await relay_until_remembered(parts, terminal=None)
    assert seen == [parts]  # every chunk out, the end of the body held
    assert asgi.finished
