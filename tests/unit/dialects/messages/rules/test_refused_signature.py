"""TM513: Anthropic refuses a thinking block's signature (AM-14), and toolmend sends the request once more without
its thinking, under ``--thinking-policy drop``; under ``reject`` the refusal is relayed as it came. The rule's
docstring example, the retried body, and the request path with respx as the upstream: the policy decides, only that
refusal is retried and only once, JSON and streamed, reported like every repair and merged with the request's own.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import httpx
import orjson
import pytest

from proxy import endpoint
from proxy.dialects import CHAT, MESSAGES, RESPONSES
from proxy.dialects.messages.blocks import content_blocks, is_thinking
from proxy.dialects.messages.plan import retried
from proxy.dialects.messages.rules import refused_signature
from proxy.dialects.refusal import FirstEvent
from proxy.endpoint import LARGE_BODY_BYTES, REFUSAL_BYTES
from proxy.logs import TextFormatter
from proxy.relay import peek
from proxy.repair import Policy
from proxy.repair.catalog import describe
from tests.support.messages_upstream import sse_events
from tests.support.messages_validator import ServerState, violations
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import (
    AUTH,
    AsgiCall,
    ScriptedStream,
    build_app,
    call_asgi,
    make_settings,
    running_proxy,
    sse_response,
    started,
    tenant_for,
)
from tests.support.retries import PIECE, pieces, retry_of, scripted, sent
from tests.unit.support.test_messages_support import ID_A, ID_B, MANUAL, Q, assistant, req, result, text, thinking, use, user

PATH = "/v1/messages"
HEADERS = {**AUTH, "anthropic-version": "2023-06-01"}
RAW_HEADERS = [(name.encode(), value.encode()) for name, value in HEADERS.items()]
REFUSAL = "messages.1.content.0: Invalid `signature` in `thinking` block"
#: The 2026-09 wording: a block bound to another conversation prefix or system prompt.
BOUND = (REFUSAL + ". The block is bound to a different conversation. Remove the block, or set "
         '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block". That setting requires the '
         "`thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header. The `system` prompt differs from the one "
         "this block was created with.")
DOC = describe(refused_signature)
FOREIGN = thinking("Paris first.", "Zm9yZWlnbi0x")  # minted for another model: only the upstream can tell
OLDER = thinking("A greeting.", "Zm9yZWlnbi0y")
#: A tool loop in progress, manual thinking on, signed thinking in an earlier answer and in the current tool turn.
LOOP = req(Q, assistant(OLDER, text("Hello.")), user(text("Weather in Paris?")), assistant(FOREIGN, use(ID_A)), user(result(ID_A)),
           thinking=MANUAL, tools=[{"name": "get_weather", "input_schema": {"type": "object"}}])
CALL_ID = "toolu_01RetriedAnswer00000000"
ANSWER = {"id": "msg_01Retried", "type": "message", "role": "assistant", "model": "claude-strict-test",
          "content": [{"type": "text", "text": "And the time."}, {"type": "tool_use", "id": CALL_ID, "name": "get_time", "input": {}}],
          "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def refusal(message: str = REFUSAL, status: int = 400) -> httpx.Response:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}, "request_id": "req_011CRefused"}
    return httpx.Response(status, content=orjson.dumps(body), headers={"content-type": "application/json", "request-id": "req_011CRefused"})


def accepted() -> httpx.Response:
    return httpx.Response(200, content=orjson.dumps(ANSWER), headers={"content-type": "application/json"})


def streamed() -> httpx.Response:
    events = b"".join(b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n" for name, data in sse_events(ANSWER, 3))
    return sse_response(ScriptedStream([events]))


def thinking_in(body: dict[str, Any]) -> list[Any]:
    return [block for message in body["messages"] for block in content_blocks(message) if is_thinking(block)]


# --- the rule ----------------------------------------------------------------------------------------------------


def test_the_docstring_example_is_retried_as_its_good_history() -> None:
    body = req(*DOC.bad, **DOC.request)
    result_ = retried(body, MESSAGES.profile("anthropic"), Policy())
    assert result_ is not None and result_.body["messages"] == DOC.good
    assert "thinking" not in result_.body  # the final tool turn no longer starts with thinking: TM510 turned it off
    assert {finding.code for finding in result_.findings} == {"TM513", "TM510"}
    assert body == req(*DOC.bad, **DOC.request)  # what was sent is never edited
    # The upstream refuses Bad (it never minted those signatures) and takes Good as it is sent.
    assert [found.rule for found in violations(body, state=ServerState())] == ["AM-14"]
    assert violations(result_.body, state=ServerState()) == []


def test_the_retried_body_keeps_everything_but_thinking() -> None:
    body = req(Q, assistant(OLDER, text("Hello.")), user(text("More?")), assistant(FOREIGN), user(text("Go on.")), thinking=MANUAL, system="Terse.")
    result_ = retried(body, MESSAGES.profile("anthropic"), Policy())
    assert result_ is not None
    assert result_.body == {**body, "messages": [Q, assistant(text("Hello.")), user(text("More?")), assistant(text("[reasoning elided]")),
                                                 user(text("Go on."))]}  # no tool turn in progress: thinking stays on
    assert [(finding.code, finding.index, finding.action) for finding in result_.findings] == [("TM513", 1, "removed"), ("TM513", 3, "elided")]
    assert retried(req(Q, assistant(text("Hi.")), user(text("Again"))), MESSAGES.profile("anthropic"), Policy()) is None  # nothing to drop
    assert retried(body, MESSAGES.profile("anthropic"), Policy(thinking="reject")) is None


@pytest.mark.parametrize(("status", "message", "retries"), [
    (400, REFUSAL, True),
    (400, BOUND, True),
    (400, "messages.1.content.0: Invalid `data` in `redacted_thinking` block", True),
    # Bedrock's, Vertex's and OpenRouter's wordings: no backticks, prefixed, suffixed, a signature missing.
    (400, "messages.1.content.0: Invalid signature in thinking block", True),
    (400, "The model returned the following errors: messages.1.content.0: Invalid signature in thinking block", True),
    (400, "Validation error: messages.1.content.0.thinking.signature: Field required", True),
    (400, "messages.1.content.0: Invalid `signature` in `thinking` block (Service: BedrockRuntime, Status Code: 400", True),
    (400, "messages.1.content.0: Invalid `text` in `text` block", False),
    (400, "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01.", False),
    (500, REFUSAL, False),
])
def test_only_a_400_refusing_a_signature_is_retried_and_only_by_messages(status: int, message: str, retries: bool) -> None:
    error = refusal(message, status).content
    drop, reject = Policy(), Policy(thinking="reject")
    assert (retry_of(MESSAGES, status, error, LOOP, MESSAGES.profile("anthropic"), drop) is not None) == retries
    assert retry_of(MESSAGES, status, error, LOOP, MESSAGES.profile("anthropic"), reject) is None
    assert not MESSAGES.retries(status, reject)
    assert not CHAT.retries(status, drop) and retry_of(CHAT, status, error, LOOP, CHAT.profile("openai"), drop) is None
    # Responses reads a 400 too (RS-11, TM408), and knows no fix for this one.
    assert retry_of(RESPONSES, status, error, LOOP, RESPONSES.profile("openai"), drop) is None
    assert retry_of(MESSAGES, 400, b"Invalid `signature` in `thinking` block", LOOP, MESSAGES.profile("anthropic"), drop) is None  # not JSON


# --- the request path --------------------------------------------------------------------------------------------


#: The same refusal as it reaches clients through Bedrock, Vertex and OpenRouter, and redacted thinking's.
WORDINGS = {
    "2025": REFUSAL,
    "2026-09": BOUND,
    "no-backticks": "The model returned the following errors: messages.1.content.0: Invalid signature in thinking block",
    "field-required": "Validation error: messages.1.content.0.thinking.signature: Field required",
    "redacted": "messages.1.content.1: Invalid `data` in `redacted_thinking` block",
}


@pytest.mark.parametrize("message", WORDINGS.values(), ids=WORDINGS.keys())
async def test_a_refused_signature_is_sent_again_without_thinking_and_the_client_gets_the_answer(upstream, caplog, message: str) -> None:
    caplog.set_level(logging.INFO, logger="toolmend.access")
    route = scripted(upstream, "/messages", refusal(message), accepted())
    client_bytes = orjson.dumps(LOOP)
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, content=client_bytes, headers=HEADERS)
        metrics = (await proxy.client.get("/metrics")).text
        remembered = await proxy.state.store.recall(f"{tenant_for()}/messages", [CALL_ID])
    assert (response.status_code, response.json()) == (200, ANSWER)
    first, again = sent(route)
    assert first == client_bytes  # valid as far as toolmend can tell: the client's own bytes went first
    retry = orjson.loads(again)
    assert thinking_in(retry) == [] and "thinking" not in retry
    assert retry["messages"] == [Q, assistant(text("Hello.")), user(text("Weather in Paris?")), assistant(use(ID_A)), user(result(ID_A))]
    assert {key: value for key, value in retry.items() if key not in ("messages", "thinking")} == {
        key: value for key, value in LOOP.items() if key not in ("messages", "thinking")}
    assert [call.request.headers["authorization"] for call in route.calls] == [HEADERS["authorization"]] * 2
    assert response.headers["x-toolmend-repairs"] == "TM513=2,TM510=1"
    assert 'toolmend_repairs_total{profile="anthropic",rule="TM513"} 2.0' in metrics
    assert 'toolmend_repairs_total{profile="anthropic",rule="TM510"} 1.0' in metrics
    [record] = [r for r in caplog.records if r.name == "toolmend.access" and r.request["path"] == PATH]  # type: ignore[attr-defined]
    assert " repairs=TM513=2,TM510=1 " in TextFormatter().format(record)
    assert remembered[CALL_ID]["blocks"] == ANSWER["content"]  # the retry's answer is remembered as usual


@pytest.mark.parametrize("policy", ["drop", "reject"])
async def test_the_thinking_policy_decides_whether_the_refusal_is_retried_or_relayed(upstream, policy: str) -> None:
    route = scripted(upstream, "/messages", refusal(), accepted())
    async with running_proxy(make_settings(thinking_policy=policy)) as proxy:
        response = await proxy.client.post(PATH, json=LOOP, headers=HEADERS)
    if policy == "drop":
        assert (response.status_code, route.call_count) == (200, 2)
        return
    assert (response.status_code, route.call_count) == (400, 1)
    assert response.content == refusal().content and response.headers["request-id"] == "req_011CRefused"
    assert "x-toolmend-repairs" not in response.headers


JSON = "application/json"


@pytest.mark.parametrize(("status", "content", "content_type"), [
    (400, refusal("messages.3: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01.").content, JSON),
    (401, refusal(status=401).content, JSON),
    (400, b"Invalid `signature` in `thinking` block", "text/plain"),
    (400, orjson.dumps({"message": REFUSAL}), JSON),  # the words, but not under `error`: not Anthropic's refusal
    # Larger than toolmend reads (64 KB), arriving in pieces: relayed as it comes, the part read first, then the rest.
    (400, orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": REFUSAL}, "padding": "x" * 70_000}), JSON),
], ids=["other-text", "other-status", "not-json", "no-error-object", "too-large"])
async def test_any_other_refusal_is_relayed_byte_identical_after_one_call(upstream, status: int, content: bytes, content_type: str) -> None:
    route = scripted(upstream, "/messages", pieces(status, content, content_type), accepted())
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=LOOP, headers=HEADERS)
        assert (response.status_code, response.content, route.call_count) == (status, content, 1)
        assert response.headers["content-type"] == content_type
        assert "x-toolmend-repairs" not in response.headers
        # The same request refused for its signature is retried: the bound and the match are what kept the others.
        route.side_effect = [refusal(), accepted()]
        assert (await proxy.client.post(PATH, json=LOOP, headers=HEADERS)).status_code == 200
    assert route.call_count == 3


def padded_refusal(size: int) -> bytes:
    """The signature refusal, padded to exactly ``size`` bytes."""
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": REFUSAL}, "padding": ""}
    body["padding"] = "x" * (size - len(orjson.dumps(body)))
    content = orjson.dumps(body)
    assert len(content) == size
    return content


async def test_a_refusal_of_exactly_the_read_limit_is_read_whole_and_retried(upstream) -> None:
    route = scripted(upstream, "/messages", pieces(400, padded_refusal(REFUSAL_BYTES)), accepted())
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=LOOP, headers=HEADERS)
    assert (response.status_code, response.json(), route.call_count) == (200, ANSWER, 2)


async def test_an_upstream_that_breaks_off_while_its_refusal_is_read_leaves_the_answer_unfinished_and_says_so(upstream, caplog) -> None:
    content = padded_refusal(8 * PIECE)
    broken = pieces(400, content[:5 * PIECE], JSON, httpx.RemoteProtocolError("peer closed connection without sending complete message body"))
    route = scripted(upstream, "/messages", broken, accepted())
    call = AsgiCall()
    async with running_proxy() as proxy:
        await call_asgi(proxy.app, call, "POST", PATH, [(b"content-type", b"application/json"), *RAW_HEADERS], [orjson.dumps(LOOP)])
    assert (call.status, route.call_count) == (400, 1)
    assert b"".join(call.body_chunks) == content[:5 * PIECE]  # what came, as it came
    assert not call.finished  # the body is left unterminated: the client sees the truncation, not a whole refusal
    assert "upstream stream ended early: RemoteProtocolError" in caplog.text


async def test_a_second_refusal_is_relayed_as_sent_after_exactly_two_calls(upstream) -> None:
    again = refusal("messages.1.content.0: Invalid `signature` in `thinking` block (again)")
    route = scripted(upstream, "/messages", refusal(), again, accepted())
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=LOOP, headers=HEADERS)
    assert (response.status_code, response.content, route.call_count) == (400, again.content, 2)
    assert response.headers["x-toolmend-repairs"] == "TM513=2,TM510=1"  # what was done, though it did not help


async def test_a_streamed_request_is_retried_and_its_stream_relayed_and_remembered(upstream) -> None:
    route = scripted(upstream, "/messages", refusal(), streamed())
    body = {**LOOP, "stream": True}
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=body, headers=HEADERS)
        remembered = await proxy.state.store.recall(f"{tenant_for()}/messages", [CALL_ID])
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert b"event: message_stop" in response.content and response.headers["x-toolmend-repairs"] == "TM513=2,TM510=1"
    retry = orjson.loads(sent(route)[1])
    assert retry["stream"] is True and thinking_in(retry) == [] and "thinking" not in retry
    assert remembered[CALL_ID]["blocks"] == ANSWER["content"]


async def test_the_retry_starts_from_the_repaired_body_and_the_repairs_are_merged(upstream) -> None:
    # The client's history needs a repair of its own first (an empty text block, TM504).
    body = {**LOOP, "messages": [*LOOP["messages"][:3], assistant(FOREIGN, text(""), use(ID_A)), *LOOP["messages"][4:]]}
    route = scripted(upstream, "/messages", refusal(), accepted())
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=body, headers=HEADERS)
        metrics = (await proxy.client.get("/metrics")).text
    first, again = (orjson.loads(content) for content in sent(route))
    assert first == LOOP  # repaired: the empty text went
    assert orjson.loads(sent(route)[1])["messages"][3] == assistant(use(ID_A)) and "thinking" not in again
    assert response.status_code == 200 and response.headers["x-toolmend-repairs"] == "TM504=1,TM513=2,TM510=1"
    assert 'toolmend_repairs_total{profile="anthropic",rule="TM504"} 1.0' in metrics  # counted once, not again on the retry


async def test_a_parallel_tool_turn_keeps_every_call_and_result(upstream) -> None:
    body = req(Q, assistant(FOREIGN, text("Both."), use(ID_A), use(ID_B, "get_time")), user(result(ID_A), result(ID_B)), thinking=MANUAL)
    route = scripted(upstream, "/messages", refusal(), accepted())
    async with running_proxy() as proxy:
        assert (await proxy.client.post(PATH, json=body, headers=HEADERS)).status_code == 200
    assert orjson.loads(sent(route)[1])["messages"] == [Q, assistant(text("Both."), use(ID_A), use(ID_B, "get_time")), user(result(ID_A), result(ID_B))]


# --- every shape the refusal reaches a client in -----------------------------------------------------------------

#: What Anthropic's refusal becomes through OpenRouter (its body quoted in ``metadata.raw``) and Bedrock (its
#: ``ValidationException``, the type in a header or in the body), in their wordings.
WRAPPED = {
    "openrouter": (orjson.dumps({"error": {"message": "Provider returned error", "code": 400, "metadata": {
        "raw": orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": REFUSAL}}).decode(),
        "provider_name": "Anthropic"}}}), {}),
    "bedrock-header": (orjson.dumps({"message": "The model returned the following errors: messages.1.content.0: Invalid signature in "
                                                "thinking block"}),
                       {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}),
    "bedrock-type": (orjson.dumps({"__type": "com.amazon.coral.validate#ValidationException",
                                   "message": "Validation error: messages.1.content.0.thinking.signature: Field required"}), {}),
}


@pytest.mark.parametrize("shape", WRAPPED)
async def test_a_refusal_wrapped_by_openrouter_or_bedrock_is_retried(upstream, shape: str) -> None:
    body, headers = WRAPPED[shape]
    wrapped = httpx.Response(400, content=body, headers={"content-type": "application/json", **headers})
    route = scripted(upstream, "/messages", wrapped, accepted())
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=LOOP, headers=HEADERS)
    assert (response.status_code, route.call_count) == (200, 2)
    assert thinking_in(orjson.loads(sent(route)[1])) == [] and response.headers["x-toolmend-repairs"] == "TM513=2,TM510=1"


async def test_a_message_without_bedrock_s_type_is_not_read_as_its_refusal(upstream) -> None:
    bare = httpx.Response(400, content=orjson.dumps({"message": REFUSAL}), headers={"content-type": "application/json"})
    route = scripted(upstream, "/messages", bare, accepted())
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=LOOP, headers=HEADERS)
    assert (response.status_code, response.content, route.call_count) == (400, bare.content, 1)


def error_event(message: str = REFUSAL) -> bytes:
    data = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return b"event: error\ndata: " + orjson.dumps(data) + b"\n\n"


async def test_a_refusal_that_is_a_stream_s_first_event_is_retried(upstream) -> None:
    refused_stream = ScriptedStream([error_event()])
    route = scripted(upstream, "/messages", sse_response(refused_stream), streamed())
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json={**LOOP, "stream": True}, headers=HEADERS)
    assert response.status_code == 200 and b"event: message_stop" in response.content and b"event: error" not in response.content
    assert route.call_count == 2 and response.headers["x-toolmend-repairs"] == "TM513=2,TM510=1"
    assert thinking_in(orjson.loads(sent(route)[1])) == [] and refused_stream.closed.is_set()


@pytest.mark.parametrize("first", [error_event("Overloaded"), b"event: ping\ndata: {\"type\": \"ping\"}\n\n"], ids=["other-error", "ping"])
async def test_a_stream_whose_first_event_is_no_such_refusal_is_relayed_byte_for_byte(upstream, first: bytes) -> None:
    events = b"".join(b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n" for name, data in sse_events(ANSWER, 3))
    # The first event split across chunks, the rest after it as the upstream sends it.
    chunks = [first[:7], first[7:], events[:50], events[50:]]
    route = scripted(upstream, "/messages", sse_response(ScriptedStream(chunks)), accepted())
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json={**LOOP, "stream": True}, headers=HEADERS)
    assert (response.status_code, response.content, route.call_count) == (200, b"".join(chunks), 1)
    assert "x-toolmend-repairs" not in response.headers


#: What may come first in a stream that is no refusal: keep-alives (OpenRouter's comment, an event without data, a
#: blank line) and an event that is no JSON; each ends the reading of the first event.
KEPT_ALIVE = [b": OPENROUTER PROCESSING\n\n", b"event: ping\n\n", b"\n"]
NOT_JSON = b"data: not json\n\n"


@pytest.mark.parametrize("before", [[], *([first] for first in KEPT_ALIVE), [NOT_JSON]],
                         ids=["event", "comment", "dataless-event", "blank-line", "not-json"])
async def test_a_stream_is_relayed_once_its_first_event_is_read_not_when_it_ends(upstream, before: list[bytes]) -> None:
    events = [b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n" for name, data in sse_events(ANSWER, 3)]
    first, *rest = [*before, *events]
    more = anyio.Event()  # the upstream sends the rest only once the first event (or comment) reached the client
    scripted(upstream, "/messages", sse_response(ScriptedStream([first, more, *rest])))
    asgi = AsgiCall()

    async def on_send(message: dict[str, Any]) -> None:
        if message.get("body") == first:
            more.set()

    asgi.on_send = on_send
    async with started(build_app()) as app:
        with anyio.fail_after(HANG_GUARD):
            await call_asgi(app, asgi, "POST", PATH, [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in HEADERS.items())],
                            [orjson.dumps({**LOOP, "stream": True})])
    assert (asgi.status, asgi.body_chunks) == (200, [first, *rest])


@pytest.mark.parametrize("kept_alive", KEPT_ALIVE, ids=["comment", "dataless-event", "blank-line"])
async def test_the_first_event_is_read_no_further_than_the_first_keep_alive(kept_alive: bytes) -> None:
    stream = ScriptedStream([kept_alive] * 100)
    answer = sse_response(stream)
    first = FirstEvent(REFUSAL_BYTES)
    assert await peek(answer, REFUSAL_BYTES, first.read) == kept_alive and first.finished and first.refusal is None
    assert stream.yielded == 1 and await answer.aread() == kept_alive * 100  # the rest is relayed after it, unread till then


# --- what memory knows -------------------------------------------------------------------------------------------

MINTED = thinking("Lyon now.", "bWludGVkLWhlcmU=")  # minted for this client's key: toolmend captured it
MINTED_ANSWER = {**ANSWER, "content": [MINTED, *ANSWER["content"]]}
#: The session after the key switch: an earlier turn's foreign thinking, then the turn minted for this key, in progress.
SWITCHED = req(Q, assistant(FOREIGN, use(ID_A)), user(result(ID_A)), assistant(MINTED, text("And the time."), use(CALL_ID, "get_time")),
               user(result(CALL_ID)), thinking=MANUAL, tools=LOOP["tools"])


async def test_the_retry_keeps_the_thinking_memory_captured_for_this_key(upstream) -> None:
    route = scripted(upstream, "/messages", httpx.Response(200, json=MINTED_ANSWER), refusal(), accepted())
    async with running_proxy() as proxy:
        assert (await proxy.client.post(PATH, json=LOOP, headers=HEADERS)).status_code == 200  # MINTED captured
        response = await proxy.client.post(PATH, json=SWITCHED, headers=HEADERS)
    assert (response.status_code, route.call_count) == (200, 3)
    retry = orjson.loads(sent(route)[2])
    assert thinking_in(retry) == [MINTED] and retry["thinking"] == MANUAL  # only the foreign thinking went
    assert response.headers["x-toolmend-repairs"] == "TM513=1"


async def test_what_was_refused_is_left_out_of_the_tenant_s_next_requests_before_they_are_sent(upstream, caplog) -> None:
    caplog.set_level(logging.INFO, logger="toolmend.access")
    route = scripted(upstream, "/messages", refusal(), accepted(), accepted(), accepted())
    later = {**LOOP, "messages": [*LOOP["messages"], assistant(text("Done.")), user(text("Thanks."))]}
    async with running_proxy() as proxy:
        assert (await proxy.client.post(PATH, json=LOOP, headers=HEADERS)).status_code == 200  # refused, retried
        remembered = await proxy.client.post(PATH, json=later, headers=HEADERS)
        other_key = await proxy.client.post(PATH, json=later, headers={**HEADERS, "authorization": "Bearer sk-ant-another-key-000"})
    assert (remembered.status_code, route.call_count) == (200, 4)
    _, retry, unrefused, _ = (orjson.loads(body) for body in sent(route))
    assert thinking_in(unrefused) == [] and unrefused["messages"][:5] == retry["messages"]
    assert remembered.headers["x-toolmend-repairs"] == "TM513=2"
    assert sent(route)[3] == orjson.dumps(later) and "x-toolmend-repairs" not in other_key.headers  # memory is per tenant
    assert any(" repairs=TM513=2 " in TextFormatter().format(record) for record in caplog.records if record.name == "toolmend.access")


#: LOOP grown large enough for the work on it to run beside the event loop.
LARGE = {**LOOP, "messages": [*LOOP["messages"], assistant(text("Done.")), user(text("x" * LARGE_BODY_BYTES))]}


def threads_calling(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """The thread of every call of ``proxy.endpoint``'s ``name`` from now on."""
    threads: list[int] = []
    original = getattr(endpoint, name)

    def recording(*args: Any) -> Any:
        threads.append(threading.get_ident())
        return original(*args)

    monkeypatch.setattr(endpoint, name, recording)
    return threads


async def test_what_a_large_body_s_retry_leaves_out_is_chosen_beside_the_event_loop(upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    route = scripted(upstream, "/messages", refusal(), accepted())
    threads = threads_calling(monkeypatch, "chosen")
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json=LARGE, headers=HEADERS)
    assert (response.status_code, route.call_count, response.headers["x-toolmend-repairs"]) == (200, 2, "TM513=2")
    assert threads and threading.get_ident() not in threads


async def test_what_was_refused_is_looked_for_in_a_large_body_beside_the_event_loop(upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsing, walking and hashing a large body is work like its repair."""
    route = scripted(upstream, "/messages", refusal(), accepted(), accepted())
    async with running_proxy() as proxy:
        assert (await proxy.client.post(PATH, json=LOOP, headers=HEADERS)).status_code == 200  # refused, retried: noted
        threads = threads_calling(monkeypatch, "digest")
        response = await proxy.client.post(PATH, json=LARGE, headers=HEADERS)
    assert (response.status_code, route.call_count, response.headers["x-toolmend-repairs"]) == (200, 3, "TM513=2")
    assert threads and threading.get_ident() not in threads


async def test_a_retry_refused_again_remembers_nothing(upstream) -> None:
    route = scripted(upstream, "/messages", refusal(), refusal(), refusal(), accepted())
    async with running_proxy() as proxy:
        assert (await proxy.client.post(PATH, json=LOOP, headers=HEADERS)).status_code == 400
        assert (await proxy.client.post(PATH, json=LOOP, headers=HEADERS)).status_code == 200
    assert sent(route)[2] == orjson.dumps(LOOP)  # sent as the client's bytes: nothing was remembered as refused
