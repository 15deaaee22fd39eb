"""Fuzzing the repair engine and the HTTP layer with hypothesis.

Never a 500 from the proxy's own code, never an unhandled exception, whatever the body: arbitrary JSON,
wrong types, huge and deeply nested values, invalid UTF-8, random SSE from the upstream. Over HTTP the
proxy sits in front of the strict upstream (a real server on loopback), and each request is checked for
what was forwarded: nothing (the proxy's own 400), the client's very bytes, or exactly the engine's repair.
The normal suite runs 150 derandomized examples per property; the long random campaign is
``TOOLMEND_HYPOTHESIS=campaign TOOLMEND_HYPOTHESIS_EXAMPLES=100000 python -m pytest tests/unit/dialects/chat/test_fuzz.py``.
"""

import json
from collections import Counter

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from proxy.app import create_app
from proxy.config import Settings
from proxy.endpoint import summarize
from proxy.repair import PROFILES, Policy, Result, needs_repair, plan, repair
from tests.support.hypothesis_budget import examples
from tests.support.strict_upstream import OPENAI_SKIPS, Recorder
from tests.support.strict_validator import first_error

FUZZ = settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
ids = st.sampled_from(["call_1", "call_2", "", "x" * 50, "a1B2c3D4e"]) | st.text(max_size=12)
# Junk is one choice in four: often enough to hit every refusal, rare enough that most bodies get as far as
# the repair engine and the strict upstream.
roles = st.one_of(*[st.sampled_from(["system", "user", "assistant", "tool", "function", "developer", "critic"])] * 3, json_values)
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
messages = st.lists(st.one_of(message, message, message, json_values), max_size=8)
bodies = st.one_of(*[st.fixed_dictionaries({"messages": messages}, optional={"model": json_values, "tools": json_values, "stream": json_values})] * 3, json_values)


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
    plan(body, selected)
    needs_repair(body, selected)
    result = repair(body, profile=selected, policy=Policy(orphans=policy))
    if result.changed:
        orjson.dumps(result.body)  # what the proxy will send must serialize


def test_engine_handles_nesting_deeper_than_the_encoder_allows() -> None:
    result = repair(deeply_nested(400))
    assert result.rejected is not None or orjson.dumps(result.body)


async def post_all(upstream: str, payloads: list[bytes], transport: httpx.AsyncBaseTransport | None = None) -> list[httpx.Response]:
    """Each payload through a fresh proxy (its own empty memory) to ``upstream``."""
    app = create_app(Settings(upstream=upstream), transport=transport)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test")
    async with app.router.lifespan_context(app), client:
        return [await client.post("/v1/chat/completions", content=payload, headers={"content-type": "application/json"}) for payload in payloads]


async def post_strict(upstream: tuple[str, Recorder], payload: bytes) -> tuple[httpx.Response, Recorder]:
    """One payload through the proxy to the strict upstream (a real server on loopback)."""
    url, recorder = upstream
    recorder.reset()
    (answer,) = await post_all(url + "/v1", [payload])
    return answer, recorder


def expected_repair(payload: bytes) -> Result | None:
    """What the proxy's engine makes of ``payload`` (profile openai, policy synthesize, nothing remembered:
    each payload meets a fresh proxy); None when the payload is not a JSON object, which the proxy refuses."""
    try:
        parsed = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return repair(parsed) if type(parsed) is dict else None


def _encodable(value: object) -> bool:
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


def check_forwarded(payload: bytes, answer: httpx.Response, recorder: Recorder) -> str:
    """The proxy refused the request itself (400 in the OpenAI shape, nothing sent upstream) exactly when
    the engine refuses it or it is no JSON object; otherwise it sent the strict upstream one request: the
    client's very bytes when nothing needed repair, else the engine's repair with the header naming it,
    and relayed the upstream's answer unchanged: the strict validator's 400 for what was sent, else 200. Returns
    what happened, for hypothesis' statistics."""
    result = expected_repair(payload)
    forwardable = result is not None and result.rejected is None and (not result.changed or _encodable(result.body))
    if not forwardable:
        assert not recorder.requests
        assert answer.status_code == 400 and set(answer.json()["error"]) == {"message", "type", "param", "code"}
        return "refused by the proxy"
    assert result is not None
    (received,) = recorder.requests
    if result.changed:
        assert orjson.loads(received.body_bytes) == orjson.loads(orjson.dumps(result.body))
        assert answer.headers["x-toolmend-repairs"] == summarize(Counter(f.code for f in result.findings))
    else:
        assert received.body_bytes == payload
        assert "x-toolmend-repairs" not in answer.headers
    verdict = first_error(json.loads(received.body_bytes), OPENAI_SKIPS)  # what a strict provider says to what was sent
    if verdict is not None:
        assert (answer.status_code, answer.json()) == (400, verdict), answer.text
    else:
        assert answer.status_code == 200, answer.text
    return f"{'repaired' if result.changed else 'sent as is'}, {'rejected' if verdict else 'accepted'} upstream"


@FUZZ
@given(body=bodies)
async def test_http_layer_forwards_json_bodies_as_sent_or_as_repaired(strict_upstream, body) -> None:
    try:
        payload = orjson.dumps(body)
    except orjson.JSONEncodeError:  # lone surrogates, integers beyond 64 bits: not JSON a client can send
        payload = None
    assume(payload is not None)
    answer, recorder = await post_strict(strict_upstream, payload)
    event(check_forwarded(payload, answer, recorder))


@FUZZ
@given(payload=st.binary(max_size=200))
async def test_http_layer_never_500s_on_arbitrary_bytes(strict_upstream, payload) -> None:
    answer, recorder = await post_strict(strict_upstream, payload)
    event(check_forwarded(payload, answer, recorder))


async def test_http_layer_rejects_absurd_nesting_and_invalid_utf8(strict_upstream) -> None:
    payloads = [
        b"[" * 5000 + b"]" * 5000,
        json.dumps(deeply_nested(400)).encode(),  # orjson encodes only 255 levels; the stdlib goes deeper
        b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}',
    ]
    answers = [await post_strict(strict_upstream, payload) for payload in payloads]
    assert [(answer.status_code, len(recorder.requests)) for answer, recorder in answers] == [(400, 0)] * 3
    assert "deeper than can be encoded" in answers[1][0].json()["error"]["message"]


UPSTREAM = "http://upstream.test/v1"  # the SSE fuzz plays the upstream itself


@FUZZ
@given(chunks=st.lists(st.binary(max_size=64) | st.sampled_from([b"data: [DONE]\n\n", b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"tool_calls\": [{\"index\": 0, \"id\": \"c\"}]}}]}\n\n", b"\r\n", b"data:", b"\n\n"]), max_size=12))
async def test_random_sse_from_the_upstream_is_relayed_exactly(chunks) -> None:
    async def sse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=iter_bytes(chunks))

    (answer,) = await post_all(UPSTREAM, [b'{"messages": [{"role": "user", "content": "hi"}], "stream": true}'], httpx.MockTransport(sse))
    assert answer.status_code == 200 and answer.content == b"".join(chunks)


async def iter_bytes(chunks: list[bytes]):
    for piece in chunks:
        yield piece


@pytest.mark.parametrize("size", [1, 10_000])
async def test_huge_values_are_handled(strict_upstream, size: int) -> None:
    big = "x" * (size * 100)
    body = {"messages": [{"role": "user", "content": big}, {"role": "tool", "tool_call_id": "o", "content": {"v": big}}]}
    payload = orjson.dumps(body)
    answer, recorder = await post_strict(strict_upstream, payload)
    check_forwarded(payload, answer, recorder)
    assert answer.status_code == 200 and recorder.last.json["messages"][2]["content"] == orjson.dumps({"v": big}).decode()
