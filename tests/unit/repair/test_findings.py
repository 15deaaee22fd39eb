"""Which re-inserted calls are real (issue 14 item 2): a call recalled from memory and one synthesized because
memory had nothing both count as ``TM101=1``; ``x-toolmend-calls``, the log line's ``calls`` field and
``toolmend_calls_reinserted_total`` tell them apart. The proxy in-process, respx as the upstream."""

import logging
from dataclasses import dataclass

import httpx
import orjson
import pytest
import respx

from proxy.logs import TextFormatter
from proxy.turns import make_turn
from tests.support.processes import free_port
from tests.support.proxy_fixtures import AUTH, Proxy, call, completion, make_settings, running_proxy, tenant_for

PATH = "/v1/chat/completions"
USER = {"role": "user", "content": "Weather in Paris?"}


@pytest.fixture
def upstream(upstream: respx.MockRouter) -> respx.MockRouter:
    """The shared respx upstream, answering every chat request with a text."""
    upstream.post("/chat/completions").mock(return_value=httpx.Response(200, json=completion(content="done")))
    return upstream


@dataclass
class Seen:
    """What one request showed of its repair, in each of the places it is reported."""

    response: httpx.Response
    log_line: str
    metrics: str
    sent: list[dict]

    def counter(self, source: str) -> str:
        return f'toolmend_calls_reinserted_total{{profile="openai",source="{source}"}}'


async def send(proxy: Proxy, upstream: respx.MockRouter, messages: list[dict], caplog: pytest.LogCaptureFixture) -> Seen:
    caplog.clear()
    response = await proxy.client.post(PATH, json={"model": "m", "messages": messages}, headers=AUTH)
    assert response.status_code == 200
    [record] = [r for r in caplog.records if r.name == "toolmend.access"]
    metrics = (await proxy.client.get("/metrics")).text
    sent = orjson.loads(upstream.calls.last.request.content)["messages"]
    return Seen(response, TextFormatter().format(record), metrics, sent)


@pytest.fixture
def access_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="toolmend.access")
    return caplog


async def test_a_call_from_memory_is_reported_as_recalled(upstream, access_log) -> None:
    remembered = call("call_mem", arguments='{"city": "Paris"}')
    async with running_proxy() as proxy:
        await proxy.state.store.remember(tenant_for(), [make_turn([remembered])])
        seen = await send(proxy, upstream, [USER, {"role": "tool", "tool_call_id": "call_mem", "content": "18C"}], access_log)
    assert seen.sent[1]["tool_calls"] == [remembered]
    assert seen.response.headers["x-toolmend-repairs"] == "TM101=1"
    assert seen.response.headers["x-toolmend-calls"] == "recalled=1,synthesized=0"
    assert " calls=recalled=1,synthesized=0 " in seen.log_line
    assert f"{seen.counter('recalled')} 1.0" in seen.metrics
    assert seen.counter("synthesized") not in seen.metrics


async def test_a_call_memory_never_saw_is_reported_as_synthesized(upstream, access_log) -> None:
    async with running_proxy() as proxy:
        seen = await send(proxy, upstream, [USER, {"role": "tool", "tool_call_id": "call_new", "content": "18C"}], access_log)
    assert seen.sent[1]["tool_calls"][0]["function"] == {"name": "unknown_tool", "arguments": "{}"}
    assert seen.response.headers["x-toolmend-repairs"] == "TM101=1"  # the same as for a recalled call: hence the new header
    assert seen.response.headers["x-toolmend-calls"] == "recalled=0,synthesized=1"
    assert " calls=recalled=0,synthesized=1 " in seen.log_line
    assert f"{seen.counter('synthesized')} 1.0" in seen.metrics
    assert seen.counter("recalled") not in seen.metrics


async def test_recalled_and_synthesized_calls_in_one_request_are_counted_apart(upstream, access_log) -> None:
    # A remembered parallel turn of two calls (both results kept) and, later, an orphan nobody remembers.
    turn = [call("call_a", arguments='{"city": "Oslo"}'), call("call_b", arguments='{"city": "Rome"}')]
    messages = [USER, {"role": "tool", "tool_call_id": "call_a", "content": "1C"}, {"role": "tool", "tool_call_id": "call_b", "content": "2C"},
                {"role": "user", "content": "And Lima?"}, {"role": "tool", "tool_call_id": "call_x", "content": "3C"}]
    async with running_proxy() as proxy:
        await proxy.state.store.remember(tenant_for(), [make_turn(turn)])
        seen = await send(proxy, upstream, messages, access_log)
    assert seen.response.headers["x-toolmend-repairs"] == "TM101=2"  # two findings ...
    assert seen.response.headers["x-toolmend-calls"] == "recalled=2,synthesized=1"  # ... three calls
    assert " calls=recalled=2,synthesized=1 " in seen.log_line
    assert f"{seen.counter('recalled')} 2.0" in seen.metrics and f"{seen.counter('synthesized')} 1.0" in seen.metrics


async def test_with_the_store_down_the_call_is_synthesized_and_says_so(upstream, access_log) -> None:
    # A real Redis store on a loopback port nothing listens on: every recall fails, the orphan policy decides.
    async with running_proxy(make_settings(memory=f"redis://127.0.0.1:{free_port()}/0")) as proxy:
        seen = await send(proxy, upstream, [USER, {"role": "tool", "tool_call_id": "call_mem", "content": "18C"}], access_log)
    assert seen.response.headers["x-toolmend-memory"] == "unavailable"
    assert seen.response.headers["x-toolmend-calls"] == "recalled=0,synthesized=1"
    assert " calls=recalled=0,synthesized=1 " in seen.log_line
    assert f"{seen.counter('synthesized')} 1.0" in seen.metrics


async def test_repairs_that_put_no_call_back_have_no_calls_header(upstream, access_log) -> None:
    # An answered call whose result is missing gets a placeholder result (TM104): no call re-inserted.
    messages = [USER, {"role": "assistant", "content": None, "tool_calls": [call("call_1")]}, {"role": "user", "content": "?"}]
    async with running_proxy() as proxy:
        seen = await send(proxy, upstream, messages, access_log)
    assert seen.response.headers["x-toolmend-repairs"] == "TM104=1"
    assert "x-toolmend-calls" not in seen.response.headers and " calls=" not in seen.log_line
    assert "toolmend_calls_reinserted_total{" not in seen.metrics
