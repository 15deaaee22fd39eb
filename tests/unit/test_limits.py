"""Limits (history entries, slow bodies, concurrent upstream requests) and the /metrics endpoint."""

import asyncio
import logging

import anyio
import httpx
import pytest

from proxy.dialects import DIALECTS
from proxy.forward import Upstream
from proxy.limits import BodyDeadline
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import AUTH, make_settings, running_proxy
from tests.support.timers import SteppedClock, stepped_clock  # noqa: F401  (stepped_clock: a fixture)

PATH = "/v1/chat/completions"
ANSWER = {"id": "c", "object": "chat.completion", "choices": []}


async def test_too_many_messages_is_a_400_before_anything_goes_upstream(upstream) -> None:
    route = upstream.post("/chat/completions").respond(json=ANSWER)
    async with running_proxy(make_settings(max_messages=3)) as proxy:
        answer = await proxy.client.post(PATH, json={"messages": [{"role": "user", "content": "x"}] * 4}, headers=AUTH)
        fine = await proxy.client.post(PATH, json={"messages": [{"role": "user", "content": "x"}] * 3}, headers=AUTH)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "too_many_messages"
    assert fine.status_code == 200 and route.call_count == 1


async def stalling():
    yield b'{"messages": ['
    await asyncio.get_running_loop().create_future()  # the rest never comes
    yield b"]}"


async def test_a_body_slower_than_the_client_timeout_is_a_408(upstream) -> None:
    route = upstream.post("/chat/completions").respond(json=ANSWER)
    async with running_proxy(make_settings(client_timeout=0.2)) as proxy, asyncio.timeout(HANG_GUARD):
        answer = await proxy.client.post(PATH, content=stalling(), headers=AUTH)
    assert answer.status_code == 408 and answer.json()["error"]["code"] == "request_timeout"
    assert not route.called


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
async def test_a_slow_body_under_messages_is_a_408_in_anthropic_s_shape(upstream, path) -> None:
    upstream.post(path.removeprefix("/v1")).respond(json={})
    async with running_proxy(make_settings(client_timeout=0.2)) as proxy, asyncio.timeout(HANG_GUARD):
        answer = await proxy.client.post(path, content=stalling(), headers=AUTH)
    assert answer.status_code == 408
    assert answer.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": answer.json()["error"]["message"]}}


async def test_at_the_upstream_cap_requests_wait_then_get_503(upstream, monkeypatch) -> None:
    monkeypatch.setattr(Upstream, "SLOT_WAIT_SECONDS", 0.2)
    relaying, release = anyio.Event(), anyio.Event()

    class Held(httpx.AsyncByteStream):
        async def __aiter__(self):
            relaying.set()
            yield b"data: {}\n\n"
            await release.wait()
            yield b"data: [DONE]\n\n"

    calls = iter([httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Held()),
                  httpx.Response(200, json=ANSWER)])
    upstream.post("/chat/completions").mock(side_effect=lambda request: next(calls))
    async with running_proxy(make_settings(max_upstream_connections=1)) as proxy:
        # httpx's ASGI transport hands over a response only once it is complete: hold the stream in a task.
        holding = asyncio.create_task(proxy.client.post(PATH, json={"messages": [], "stream": True}, headers=AUTH))
        await asyncio.wait_for(relaying.wait(), HANG_GUARD)  # the stream holds the one slot until released
        busy = await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)
        release.set()
        assert (await holding).status_code == 200
        after = await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)
    assert busy.status_code == 503 and busy.json()["error"]["code"] == "upstream_busy"
    assert after.status_code == 200  # the stream gave its slot back when it ended


async def test_the_upstream_timeout_bounds_every_phase_of_the_upstream_request(upstream) -> None:
    # The fault tests show a silent upstream ends in the timeout's 504; this shows it is --upstream-timeout.
    route = upstream.post("/chat/completions").respond(json=ANSWER)
    async with running_proxy(make_settings(upstream_timeout=7.5)) as proxy:
        assert (await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)).status_code == 200
    assert route.calls.last.request.extensions["timeout"] == {"connect": 7.5, "read": 7.5, "write": 7.5, "pool": 7.5}


async def test_metrics_count_requests_repairs_recalls_and_upstream_errors(upstream) -> None:
    upstream.post("/chat/completions").respond(json=ANSWER)
    upstream.get("/models").mock(side_effect=httpx.ConnectError("down"))
    orphan = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_x", "content": "r"}]
    async with running_proxy(make_settings(memory="memory://")) as proxy:
        await proxy.client.post(PATH, json={"messages": orphan}, headers=AUTH)
        await proxy.client.get("/v1/models", headers=AUTH)
        text = (await proxy.client.get("/metrics")).text
    assert 'toolmend_requests_total{route="chat",status="200"} 1.0' in text
    assert 'toolmend_requests_total{route="passthrough",status="502"} 1.0' in text
    assert 'toolmend_repairs_total{profile="openai",rule="TM101"} 1.0' in text
    assert 'toolmend_memory_recalls_total{backend="memory",result="miss"} 1.0' in text
    assert 'toolmend_upstream_errors_total{kind="upstream_unreachable"} 1.0' in text
    assert 'toolmend_upstream_first_byte_seconds_count{route="chat"} 1.0' in text
    assert "toolmend_open_streams 0.0" in text


class Calls:
    """An ASGI call to ``BodyDeadline`` alone: the body comes at once; then ``receive`` waits for ``leave``."""

    def __init__(self) -> None:
        self.body_taken, self.leave = asyncio.Event(), asyncio.Event()
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        if not self.body_taken.is_set():
            self.body_taken.set()
            return {"type": "http.request", "body": b"{}", "more_body": False}
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        self.sent.append(message)


async def test_once_the_body_is_in_waiting_for_a_disconnect_is_not_timed(stepped_clock: SteppedClock) -> None:
    """--client-timeout bounds the body only: an app that waits for the client to leave (a long answer watching for a
    disconnect) still hears of it after the bound."""
    calls, heard = Calls(), []

    async def app(scope, receive, send) -> None:
        await receive()  # the whole body
        heard.append((await receive())["type"])  # then the client's leaving, however long it takes

    running = asyncio.get_running_loop().create_task(BodyDeadline(app, 1.0)({"type": "http"}, calls.receive, calls.send))
    await calls.body_taken.wait()
    await stepped_clock.advance(2.0)  # past --client-timeout
    calls.leave.set()
    async with asyncio.timeout(HANG_GUARD):
        await running
    assert heard == ["http.disconnect"] and calls.sent == []


async def test_a_body_timeout_after_the_answer_began_ends_it_without_a_second_answer(stepped_clock: SteppedClock, caplog) -> None:
    caplog.set_level(logging.INFO, logger="toolmend")
    calls = Calls()
    calls.body_taken.set()  # the body never comes

    async def app(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})  # an answer that begins early
        await receive()

    running = asyncio.get_running_loop().create_task(BodyDeadline(app, 1.0)({"type": "http"}, calls.receive, calls.send))
    await stepped_clock.advance(2.0)
    async with asyncio.timeout(HANG_GUARD):
        await running
    assert [message["type"] for message in calls.sent] == ["http.response.start"]  # no 408 after a 200 began
    assert "request body slower than 1 s (--client-timeout) after the answer began" in caplog.text


@pytest.mark.parametrize(("path", "body", "shape"), [
    # chat: two messages, but a turn of three calls and a user message of two parts
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                                           {"role": "assistant", "content": None, "tool_calls": [
                                               {"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                                               for n in range(3)]}]}, "openai"),
    # Messages: one message of five blocks
    ("/v1/messages", {"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}] * 5}]}, "anthropic"),
    # Messages: two messages of two blocks each
    ("/v1/messages", {"max_tokens": 8, "messages": [
        {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}, {"type": "text", "text": "b"}]}]},
     "anthropic"),
    # Responses: one message item of five parts
    ("/v1/responses", {"input": [{"role": "user", "content": [{"type": "input_text", "text": "a"}] * 5}]}, "openai"),
], ids=["chat tool calls and parts", "messages blocks", "messages blocks of two messages", "responses content parts"])
async def test_the_history_limit_counts_what_the_rules_walk(upstream, path: str, body: dict, shape: str) -> None:
    """``--max-messages`` bounds the entries of a history the rules walk, not only its messages: a Messages body of one
    message of a million blocks was accepted, and repaired at a cost the limit was meant to bound (issue 23)."""
    route = upstream.post(path.removeprefix("/v1")).respond(json=ANSWER)
    async with running_proxy(make_settings(max_messages=4)) as proxy:
        answer = await proxy.client.post(path, json={"model": "m", **body}, headers=AUTH)
    assert answer.status_code == 400 and route.call_count == 0
    error = answer.json()
    if shape == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        assert "more than 4 entries (messages and their content blocks)" in error["error"]["message"]
    else:
        assert error["error"]["code"] == "too_many_messages" and "more than 4 entries" in error["error"]["message"]


@pytest.mark.parametrize("dialect", ["chat", "messages", "responses"])
def test_counting_the_history_stops_past_the_limit(dialect: str) -> None:
    """The count is exact up to the limit and stops past it, so it costs work bounded by the limit (it runs on the event
    loop, for every request), whatever the body."""
    one = {each.name: each for each in DIALECTS}[dialect]
    part = {"type": "text", "text": "a"}
    assert one.history_length({one.history_key: [{"role": "user", "content": [part] * 3}] * 5}, 1_000) == 5 * (1 + 3)
    # Past the limit with the first of five long messages: neither its blocks nor the other four are looked into.
    assert one.history_length({one.history_key: [{"role": "user", "content": [part] * 10_000}] * 5}, 100) == 5 + 10_000
    # Longer than the limit itself: nothing is looked into.
    assert one.history_length({one.history_key: [{"role": "user", "content": [part] * 3}] * 101}, 100) == 101
