"""Fuzzing the repair engine and the HTTP layer with hypothesis.

Never a 500 from the proxy's own code, never an unhandled exception, whatever the body: arbitrary JSON,
wrong types, huge and deeply nested values, invalid UTF-8, random SSE from the upstream. The normal
suite runs a small budget; ``TOOLMEND_FUZZ_EXAMPLES=100000`` runs the long campaign (see README).
"""

import json
import os

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from proxy.app import create_app
from proxy.config import Settings
from proxy.repair import PROFILES, Policy, needs_repair, recall_ids, repair

EXAMPLES = int(os.environ.get("TOOLMEND_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
ids = st.sampled_from(["call_1", "call_2", "", "x" * 50, "a1B2c3D4e"]) | st.text(max_size=12)
roles = st.sampled_from(["system", "user", "assistant", "tool", "function", "developer", "critic"]) | json_values
call = st.fixed_dictionaries(
    {},
    optional={
        "id": ids | json_values,
        "type": st.sampled_from(["function", "custom"]) | json_values,
        "function": st.fixed_dictionaries({}, optional={"name": st.sampled_from(["f", "g", ""]) | json_values,
                                                        "arguments": st.sampled_from(["{}", '{"a": 1}', "", "{", "[1]"]) | json_values}) | json_values,
        "index": json_values,
        "extra_content": json_values,
    },
)
content = st.text(max_size=20) | st.none() | json_values | st.lists(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "input_audio"])}, optional={"text": st.text(max_size=10) | json_values, "image_url": json_values}),
    max_size=3,
)
message = st.fixed_dictionaries(
    {"role": roles},
    optional={
        "content": content,
        "tool_calls": st.lists(call | json_values, max_size=3) | json_values,
        "tool_call_id": ids | json_values,
        "name": st.sampled_from(["f", "g", "bad name!"]) | json_values,
        "function_call": st.fixed_dictionaries({}, optional={"name": st.text(max_size=5), "arguments": json_values}) | json_values,
        "reasoning_content": st.text(max_size=10) | json_values,
    },
)
messages = st.lists(message | json_values, max_size=8)
bodies = st.fixed_dictionaries({"messages": messages}, optional={"model": json_values, "tools": json_values, "stream": json_values}) | json_values


def deeply_nested(depth: int) -> dict:
    value: object = "deep"
    for _ in range(depth):
        value = {"k": value}
    return {"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": value}]}


@FUZZ
@given(body=bodies, profile=st.sampled_from(sorted(PROFILES)), policy=st.sampled_from(["synthesize", "drop", "reject"]))
@example(body={"messages": [{"role": "system", "tool_calls": True}]}, profile="anthropic", policy="synthesize")  # found by the long run
def test_engine_never_raises(body, profile, policy) -> None:
    selected = PROFILES[profile]
    recall_ids(body, selected)
    needs_repair(body, selected)
    result = repair(body, profile=selected, policy=Policy(orphans=policy))
    if result.changed:
        orjson.dumps(result.body)  # what the proxy will send must serialize


def test_engine_handles_nesting_deeper_than_the_encoder_allows() -> None:
    result = repair(deeply_nested(400))
    assert result.rejected is not None or orjson.dumps(result.body)


UPSTREAM = "http://upstream.test/v1"


async def echo_upstream(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"id": "c", "object": "chat.completion", "choices": []})


def proxy_client(handler) -> httpx.AsyncClient:
    app = create_app(Settings(upstream=UPSTREAM), transport=httpx.MockTransport(handler))
    return app, httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test")


async def post_all(handler, payloads: list[bytes]) -> list[httpx.Response]:
    app, client = proxy_client(handler)
    async with app.router.lifespan_context(app), client:
        return [await client.post("/v1/chat/completions", content=payload, headers={"content-type": "application/json"}) for payload in payloads]


@FUZZ
@given(body=bodies)
async def test_http_layer_never_500s_on_json_bodies(body) -> None:
    try:
        payload = orjson.dumps(body)
    except orjson.JSONEncodeError:
        return
    (answer,) = await post_all(echo_upstream, [payload])
    assert answer.status_code in (200, 400), answer.text
    assert "error" in answer.json() or answer.status_code == 200


@FUZZ
@given(payload=st.binary(max_size=200))
async def test_http_layer_never_500s_on_arbitrary_bytes(payload) -> None:
    (answer,) = await post_all(echo_upstream, [payload])
    assert answer.status_code in (200, 400)


async def test_http_layer_rejects_absurd_nesting_and_invalid_utf8() -> None:
    answers = await post_all(echo_upstream, [
        b"[" * 5000 + b"]" * 5000,
        json.dumps(deeply_nested(400)).encode(),  # orjson encodes only 255 levels; the stdlib goes deeper
        b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}',
    ])
    assert answers[0].status_code == 400 and answers[2].status_code == 400
    assert answers[1].status_code == 400 and "deeper than can be encoded" in answers[1].json()["error"]["message"]


@FUZZ
@given(chunks=st.lists(st.binary(max_size=64) | st.sampled_from([b"data: [DONE]\n\n", b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"tool_calls\": [{\"index\": 0, \"id\": \"c\"}]}}]}\n\n", b"\r\n", b"data:", b"\n\n"]), max_size=12))
async def test_random_sse_from_the_upstream_is_relayed_exactly(chunks) -> None:
    async def sse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=iter_bytes(chunks))

    (answer,) = await post_all(sse, [b'{"messages": [{"role": "user", "content": "hi"}], "stream": true}'])
    assert answer.status_code == 200 and answer.content == b"".join(chunks)


async def iter_bytes(chunks: list[bytes]):
    for piece in chunks:
        yield piece


@pytest.mark.parametrize("size", [1, 10_000])
async def test_huge_values_are_handled(size: int) -> None:
    big = "x" * (size * 100)
    body = {"messages": [{"role": "user", "content": big}, {"role": "tool", "tool_call_id": "o", "content": {"v": big}}]}
    (answer,) = await post_all(echo_upstream, [orjson.dumps(body)])
    assert answer.status_code == 200
