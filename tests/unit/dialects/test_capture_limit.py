"""--max-capture-bytes: an answer larger than it is relayed whole but not remembered, and counted (issue 10
item 8). What capture holds of a hostile stream stays bounded."""

import tracemalloc

import httpx
import orjson
import respx

from proxy.dialects.chat.capture import StreamCapture
from tests.support.proxy_fixtures import (
    AUTH,
    DONE,
    UPSTREAM,
    ScriptedStream,
    call,
    chunk,
    completion,
    delta,
    event,
    make_settings,
    orphan_history,
    running_proxy,
    sse_response,
    tenant_for,
)

PATH = "/v1/chat/completions"
LIMIT = 64 * 1024


def abandoned(metrics_text: str, reason: str) -> float:
    prefix = f'toolmend_capture_abandoned_total{{reason="{reason}"}} '
    return next((float(line[len(prefix):]) for line in metrics_text.splitlines() if line.startswith(prefix)), 0.0)


async def test_a_json_answer_over_the_limit_is_relayed_unchanged_and_not_remembered() -> None:
    answer = orjson.dumps(completion([call("call_huge")], content="x" * (2 * LIMIT)))
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post("/chat/completions").mock(return_value=httpx.Response(200, content=answer,
                                                                             headers={"content-type": "application/json"}))
        async with running_proxy(make_settings(max_capture_bytes=LIMIT)) as proxy:
            response = await proxy.client.post(PATH, json={"model": "m", "messages": orphan_history("call_0")}, headers=AUTH)
            assert response.status_code == 200 and response.content == answer
            assert await proxy.state.store.recall(tenant_for(), ["call_huge"]) == {}
            metrics = (await proxy.client.get("/metrics")).text
    assert abandoned(metrics, "json") == 1 and abandoned(metrics, "stream") == 0


async def test_a_stream_over_the_limit_is_relayed_unchanged_and_not_remembered() -> None:
    parts = [event(chunk([delta(tool_calls=[{"index": 0, "id": "call_long", "type": "function",
                                             "function": {"name": "weather", "arguments": ""}}])]))]
    parts += [event(chunk([delta(content="y" * 4096)])) for _ in range(2 * LIMIT // 4096)]
    parts.append(DONE)
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post("/chat/completions").mock(return_value=sse_response(ScriptedStream(parts)))
        async with running_proxy(make_settings(max_capture_bytes=LIMIT)) as proxy:
            response = await proxy.client.post(PATH, json={"model": "m", "stream": True, "messages": orphan_history("call_0")},
                                               headers=AUTH)
            assert response.status_code == 200 and response.content == b"".join(parts)
            assert await proxy.state.store.recall(tenant_for(), ["call_long"]) == {}
            metrics = (await proxy.client.get("/metrics")).text
    assert abandoned(metrics, "stream") == 1 and abandoned(metrics, "json") == 0


def test_an_endless_sse_line_is_not_held_past_the_limit() -> None:
    capture = StreamCapture(max_bytes=LIMIT)
    tracemalloc.start()
    try:
        for _ in range(256):  # 16 MiB of one line that never ends, in fresh 64 KiB chunks
            capture.feed(b"data: " + b"z" * (LIMIT - 6))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert capture.abandoned and capture.turns() == []
    assert peak < 4 * LIMIT  # the chunk being fed and little else: not the 16 MiB that went by


def test_an_answer_within_the_limit_is_captured_whole() -> None:
    capture = StreamCapture(max_bytes=LIMIT)
    capture.feed(event(chunk([delta(tool_calls=[{"index": 0, "id": "call_ok", "function": {"name": "f", "arguments": "{}"}}])])))
    capture.feed(DONE)
    assert not capture.abandoned and [c["id"] for c in capture.turns()[0]["tool_calls"]] == ["call_ok"]
