"""TM408: a Responses upstream cannot verify the encrypted content of reasoning items (RS-11), and toolmend sends the
request once more without them, under ``--thinking-policy drop``; under ``reject`` the refusal is relayed as it came.
The rule's docstring example, the retried body, and the request path with respx as the upstream: the policy decides,
only that refusal is retried and only once, JSON and streamed, reported like every repair and merged with the
request's own. The Messages equivalent (AM-14, TM513): ``tests/unit/dialects/messages/rules/test_refused_signature.py``.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import orjson
import pytest

from proxy.dialects import CHAT, MESSAGES, RESPONSES
from proxy.dialects.refusal import FirstEvent, Refusal
from proxy.dialects.responses.plan import retried
from proxy.dialects.responses.rules import refused_reasoning
from proxy.endpoint import REFUSAL_BYTES
from proxy.logs import TextFormatter
from proxy.repair import DEFAULT_PLACEHOLDER, Policy
from proxy.repair.catalog import describe
from tests.support.proxy_fixtures import AUTH, ScriptedStream, make_settings, running_proxy, sse_response, tenant_for
from tests.support.responses_validator import ServerState, first_violation, violations
from tests.support.retries import pieces, retry_of, scripted, sent
from tests.unit.dialects.responses.test_capture import CALL, CUSTOM, REASONING, STREAM, response
from tests.unit.dialects.responses.test_rules import CALL_1, CALL_2, USER, body_of, output

PATH = "/v1/responses"
OPENAI = RESPONSES.profile("openai")
DOC = describe(refused_reasoning)
#: The two wordings seen (openai/codex#8145, #8132): the blob quoted, or the item named.
QUOTED = "The encrypted content gAAA...DQ== could not be verified."
NAMED = "The encrypted content for item rs_1 could not be verified. Reason: Encrypted content could not be decrypted or parsed."
FOREIGN = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-minted-for-another-org-1"}
LATER = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA-minted-for-another-org-2"}
ANSWER = {"type": "message", "id": "msg_2", "role": "assistant", "content": [{"type": "output_text", "text": "18C at 9:00."}]}
COMPACTION = {"type": "compaction", "encrypted_content": "gAAAA-summary"}
TOOLS = [{"type": "function", "name": "weather", "parameters": {"type": "object"}}, {"type": "function", "name": "time"}]
#: A session that went on after a key switch: stored items with their ids, and reasoning the upstream cannot verify.
LOOP = body_of([COMPACTION, USER, FOREIGN, CALL_1, CALL_2, output("call_1"), output("call_2", "9:00"), LATER, ANSWER,
                {"role": "user", "content": "And in Lyon?"}], tools=TOOLS, include=["reasoning.encrypted_content"])
#: LOOP as the retry sends it: no reasoning, and the items it produced without their server ids (TM405).
RETRIED = [COMPACTION, USER, {k: v for k, v in CALL_1.items() if k != "id"}, {k: v for k, v in CALL_2.items() if k != "id"},
           output("call_1"), output("call_2", "9:00"), {k: v for k, v in ANSWER.items() if k != "id"}, LOOP["input"][-1]]
ACCEPTED = response([REASONING, CALL, CUSTOM])


def refusal(message: str = QUOTED, status: int = 400, code: str | None = "invalid_encrypted_content") -> httpx.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    return httpx.Response(status, content=orjson.dumps(body), headers={"content-type": "application/json", "x-request-id": "req_refused"})


def accepted() -> httpx.Response:
    return httpx.Response(200, content=orjson.dumps(ACCEPTED), headers={"content-type": "application/json"})


def streamed() -> httpx.Response:
    return sse_response(ScriptedStream([STREAM]))


def encrypted_reasoning(body: dict[str, Any]) -> list[Any]:
    return [item for item in body["input"] if item.get("type") == "reasoning" and "encrypted_content" in item]


# --- the rule ----------------------------------------------------------------------------------------------------


def test_the_docstring_example_is_retried_as_its_good_history() -> None:
    body = body_of(DOC.bad)
    result = retried(body, OPENAI, Policy())
    assert result is not None and result.body["input"] == DOC.good
    assert [(finding.code, finding.index) for finding in result.findings] == [
        ("TM408", 2), ("TM408", 7), ("TM405", 3), ("TM405", 4), ("TM405", 8)]
    assert body == body_of(DOC.bad)  # what was sent is never edited
    # A server that minted the compaction for this key, stored the items, and never minted that reasoning: it refuses
    # Bad (RS-11), and takes Good, its calls and message no longer looked up without their reasoning (RS-4, RS-5).
    state = ServerState(encrypted={DOC.bad[0]["encrypted_content"]: None})
    state.remember("resp_1", DOC.bad[1:2], DOC.bad[2:5])
    state.remember("resp_2", DOC.bad[1:7], DOC.bad[7:9])
    assert [found.rule for found in violations(body, state)] == ["RS-11", "RS-11"]
    assert violations(result.body, state) == []
    still_with_ids = {**body, "input": [item for item in body["input"] if item.get("type") != "reasoning"]}
    assert [found.rule for found in violations(still_with_ids, state)] == ["RS-4", "RS-4", "RS-5"]  # why TM405 runs


def test_the_retried_body_keeps_everything_but_the_reasoning_it_cannot_verify() -> None:
    result = retried(LOOP, OPENAI, Policy())
    assert result is not None and result.body == {**LOOP, "input": RETRIED}
    assert encrypted_reasoning(result.body) == [] and result.body["input"][0] is COMPACTION  # the summary stays
    # Reasoning the server keeps itself (an id, no blob) is not what it refused: it stays, and so does its call's id.
    stored = {"type": "reasoning", "id": "rs_9", "summary": []}
    kept = retried(body_of([USER, stored, CALL_1, output("call_1"), FOREIGN, ANSWER]), OPENAI, Policy())
    assert kept is not None and kept.body["input"] == [USER, stored, CALL_1, output("call_1"), {k: v for k, v in ANSWER.items() if k != "id"}]
    # Nothing to leave out: the refusal goes to the client.
    assert retried(body_of([USER, stored, CALL_1, output("call_1"), COMPACTION]), OPENAI, Policy()) is None
    assert retried({"model": "m", "input": "hi"}, OPENAI, Policy()) is None
    assert retried(LOOP, OPENAI, Policy(thinking="reject")) is None


@pytest.mark.parametrize(("status", "message", "code", "retries"), [
    (400, QUOTED, "invalid_encrypted_content", True),
    (400, NAMED, "invalid_encrypted_content", True),
    (400, NAMED, None, True),  # the wording alone
    (400, "THE ENCRYPTED CONTENT gAAA could NOT be verified", None, True),
    (400, "Encrypted content is invalid.", "invalid_encrypted_content", True),  # the code alone
    (400, "The encrypted content for item cmp_0a18 could not be verified.", "invalid_encrypted_content", False),  # compaction
    (400, "The signature could not be verified.", None, False),
    (400, "No tool output found for function call call_1.", None, False),
    (404, QUOTED, "invalid_encrypted_content", False),
    (500, QUOTED, "invalid_encrypted_content", False),
])
def test_only_a_400_refusing_encrypted_content_is_retried_and_only_by_responses(status: int, message: str, code: str | None,
                                                                               retries: bool) -> None:
    error = refusal(message, status, code).content
    drop, reject = Policy(), Policy(thinking="reject")
    assert (retry_of(RESPONSES, status, error, LOOP, OPENAI, drop) is not None) == retries
    assert retry_of(RESPONSES, status, error, LOOP, OPENAI, reject) is None
    assert RESPONSES.retries(status, reject) == (status == 404)  # read for an unknown item id (RS-8, TM409), not this
    assert not CHAT.retries(status, drop) and retry_of(CHAT, status, error, LOOP, CHAT.profile("openai"), drop) is None
    assert retry_of(MESSAGES, status, error, LOOP, MESSAGES.profile("anthropic"), drop) is None
    assert retry_of(RESPONSES, 400, QUOTED.encode(), LOOP, OPENAI, drop) is None  # not JSON


def test_a_refusal_naming_one_item_still_leaves_out_every_encrypted_reasoning() -> None:
    retry = retry_of(RESPONSES, 400, refusal(NAMED).content, LOOP, OPENAI, Policy())
    assert retry is not None
    body, counts = retry
    assert orjson.loads(body)["input"] == RETRIED and counts == {"TM408": 2, "TM405": 3}


# --- the request path --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("message", [QUOTED, NAMED], ids=["quoted", "named"])
async def test_unverifiable_reasoning_is_sent_again_without_it_and_the_client_gets_the_answer(upstream, caplog, message: str) -> None:
    caplog.set_level(logging.INFO, logger="toolmend.access")
    route = scripted(upstream, "/responses", refusal(message), accepted())
    client_bytes = orjson.dumps(LOOP)
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, content=client_bytes, headers=AUTH)
        metrics = (await proxy.client.get("/metrics")).text
        remembered = await proxy.state.store.recall(f"{tenant_for()}/responses", [CALL["call_id"]])
    assert (response_.status_code, response_.json()) == (200, ACCEPTED)
    first, again = sent(route)
    assert first == client_bytes  # valid as far as toolmend can tell: the client's own bytes went first
    retry = orjson.loads(again)
    assert retry == {**LOOP, "input": RETRIED} and encrypted_reasoning(retry) == []
    assert [call.request.headers["authorization"] for call in route.calls] == [AUTH["authorization"]] * 2
    assert response_.headers["x-toolmend-repairs"] == "TM408=2,TM405=3"
    assert 'toolmend_repairs_total{profile="openai",rule="TM408"} 2.0' in metrics
    assert 'toolmend_repairs_total{profile="openai",rule="TM405"} 3.0' in metrics
    [record] = [r for r in caplog.records if r.name == "toolmend.access" and r.request["path"] == PATH]  # type: ignore[attr-defined]
    assert " repairs=TM408=2,TM405=3 " in TextFormatter().format(record)
    assert remembered[CALL["call_id"]]["items"] == ACCEPTED["output"]  # the retry's answer is remembered as usual


@pytest.mark.parametrize("policy", ["drop", "reject"])
async def test_the_thinking_policy_decides_whether_the_refusal_is_retried_or_relayed(upstream, policy: str) -> None:
    route = scripted(upstream, "/responses", refusal(), accepted())
    async with running_proxy(make_settings(thinking_policy=policy)) as proxy:
        response_ = await proxy.client.post(PATH, json=LOOP, headers=AUTH)
    if policy == "drop":
        assert (response_.status_code, route.call_count) == (200, 2)
        return
    assert (response_.status_code, route.call_count) == (400, 1)
    assert response_.content == refusal().content and response_.headers["x-request-id"] == "req_refused"
    assert "x-toolmend-repairs" not in response_.headers


JSON = "application/json"


@pytest.mark.parametrize(("status", "content", "content_type"), [
    (400, refusal("No tool output found for function call call_1.", code=None).content, JSON),
    (401, refusal(status=401).content, JSON),
    (400, refusal("The encrypted content for item cmp_0a18 could not be verified.").content, JSON),
    (400, QUOTED.encode(), "text/plain"),
    (400, orjson.dumps({"message": QUOTED, "code": "invalid_encrypted_content"}), JSON),  # not under `error`: not OpenAI's refusal
    # Larger than toolmend reads (64 KB), arriving in pieces: relayed as it comes, the part read first, then the rest.
    (400, orjson.dumps({"error": {"message": QUOTED, "type": "invalid_request_error", "param": None, "code": "invalid_encrypted_content"},
                        "padding": "x" * 70_000}), JSON),
], ids=["other-text", "other-status", "compaction", "not-json", "no-error-object", "too-large"])
async def test_any_other_refusal_is_relayed_byte_identical_after_one_call(upstream, status: int, content: bytes, content_type: str) -> None:
    route = scripted(upstream, "/responses", pieces(status, content, content_type), accepted())
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, json=LOOP, headers=AUTH)
        assert (response_.status_code, response_.content, route.call_count) == (status, content, 1)
        assert response_.headers["content-type"] == content_type
        assert "x-toolmend-repairs" not in response_.headers
        # The same request refused for its encrypted content is retried: the bound and the match kept the others.
        route.side_effect = [refusal(), accepted()]
        assert (await proxy.client.post(PATH, json=LOOP, headers=AUTH)).status_code == 200
    assert route.call_count == 3


async def test_a_refusal_with_no_encrypted_reasoning_to_leave_out_is_relayed_after_one_call(upstream) -> None:
    body = body_of([COMPACTION, USER, {k: v for k, v in CALL_1.items() if k != "id"}, output("call_1")], tools=TOOLS)
    route = scripted(upstream, "/responses", refusal(), refusal(), accepted())
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, json=body, headers=AUTH)
        assert (response_.status_code, response_.content, route.call_count) == (400, refusal().content, 1)
        assert "x-toolmend-repairs" not in response_.headers
        # With reasoning to leave out, the same refusal is retried.
        assert (await proxy.client.post(PATH, json=LOOP, headers=AUTH)).status_code == 200
    assert route.call_count == 3


async def test_a_second_refusal_is_relayed_as_sent_after_exactly_two_calls(upstream) -> None:
    again = refusal("The encrypted content gAAA...Zg== could not be verified.")
    route = scripted(upstream, "/responses", refusal(), again, accepted())
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, json=LOOP, headers=AUTH)
    assert (response_.status_code, response_.content, route.call_count) == (400, again.content, 2)
    assert response_.headers["x-toolmend-repairs"] == "TM408=2,TM405=3"  # what was done, though it did not help


async def test_a_streamed_request_is_retried_and_its_stream_relayed_and_remembered(upstream) -> None:
    route = scripted(upstream, "/responses", refusal(), streamed())
    body = {**LOOP, "stream": True}
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, json=body, headers=AUTH)
        remembered = await proxy.state.store.recall(f"{tenant_for()}/responses", [CALL["call_id"]])
    assert response_.status_code == 200 and response_.headers["content-type"].startswith("text/event-stream")
    assert response_.content == STREAM and response_.headers["x-toolmend-repairs"] == "TM408=2,TM405=3"
    first, again = sent(route)
    assert orjson.loads(first) == body and orjson.loads(again) == {**body, "input": RETRIED}
    assert remembered[CALL["call_id"]]["items"] == [REASONING, CALL, CUSTOM]


async def test_the_retry_starts_from_the_repaired_body_and_the_repairs_are_merged(upstream) -> None:
    # The client's history needs a repair of its own first: the output of call_2 is lost (TM104).
    lost = [item for item in LOOP["input"] if item.get("call_id") != "call_2" or item.get("type") != "function_call_output"]
    route = scripted(upstream, "/responses", refusal(), accepted())
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, json={**LOOP, "input": lost}, headers=AUTH)
        metrics = (await proxy.client.get("/metrics")).text
    first, again = (orjson.loads(content) for content in sent(route))
    placeholder = {"type": "function_call_output", "call_id": "call_2", "output": DEFAULT_PLACEHOLDER}
    assert placeholder in first["input"] and encrypted_reasoning(first) == [FOREIGN, LATER]
    assert again["input"] == [placeholder if item == output("call_2", "9:00") else item for item in RETRIED]
    assert response_.status_code == 200 and response_.headers["x-toolmend-repairs"] == "TM104=1,TM408=2,TM405=3"
    assert 'toolmend_repairs_total{profile="openai",rule="TM104"} 1.0' in metrics  # counted once, not again on the retry
    assert first_violation(again, ServerState()) is None  # nothing left for a strict server to refuse


# --- every shape the refusal reaches a client in -----------------------------------------------------------------


async def test_a_refusal_quoted_by_openrouter_is_retried(upstream) -> None:
    quoted = {"error": {"message": "Provider returned error", "code": 400,
                        "metadata": {"raw": refusal().content.decode(), "provider_name": "OpenAI"}}}
    route = scripted(upstream, "/responses", httpx.Response(400, json=quoted), accepted())
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, json=LOOP, headers=AUTH)
    assert (response_.status_code, route.call_count) == (200, 2) and orjson.loads(sent(route)[1])["input"] == RETRIED


def failed(message: str = QUOTED, code: str = "invalid_encrypted_content") -> bytes:
    data = {"type": "response.failed", "sequence_number": 0, "response": {
        "id": "resp_failed", "object": "response", "status": "failed", "output": [],
        "error": {"code": code, "message": message}}}
    return b"event: response.failed\ndata: " + orjson.dumps(data) + b"\n\n"


def error_event(message: str = QUOTED, code: str = "invalid_encrypted_content") -> bytes:
    """The stream's ``error`` event: its message and code on the event itself (openai-python's ResponseErrorEvent)."""
    data = {"type": "error", "code": code, "message": message, "param": None, "sequence_number": 1}
    return b"event: error\ndata: " + orjson.dumps(data) + b"\n\n"


@pytest.mark.parametrize("first", [failed(), error_event()], ids=["response.failed", "error"])
def test_a_stream_s_first_event_is_read_as_the_refusal_it_is(first: bytes) -> None:
    reader = FirstEvent(REFUSAL_BYTES)
    assert reader.read(first[:20]) is False and reader.read(first[20:] + STREAM) is True
    assert reader.refusal == Refusal(400, (QUOTED,), ("invalid_encrypted_content",))


@pytest.mark.parametrize("first", [failed(), error_event()], ids=["response.failed", "error"])
async def test_a_refusal_that_is_a_stream_s_first_event_is_retried(upstream, first: bytes) -> None:
    refused_stream = ScriptedStream([first[:20], first[20:]])
    route = scripted(upstream, "/responses", sse_response(refused_stream), streamed())
    body = {**LOOP, "stream": True}
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, json=body, headers=AUTH)
    assert (response_.status_code, response_.content, route.call_count) == (200, STREAM, 2)
    assert orjson.loads(sent(route)[1]) == {**body, "input": RETRIED} and response_.headers["x-toolmend-repairs"] == "TM408=2,TM405=3"
    assert refused_stream.closed.is_set()


@pytest.mark.parametrize("fails", [failed, error_event], ids=["response.failed", "error"])
async def test_a_stream_that_fails_first_for_another_reason_is_relayed_byte_for_byte(upstream, fails: Any) -> None:
    other = fails("The server had an error while processing your request.", "server_error")
    route = scripted(upstream, "/responses", sse_response(ScriptedStream([other])), streamed())
    async with running_proxy() as proxy:
        response_ = await proxy.client.post(PATH, json={**LOOP, "stream": True}, headers=AUTH)
    assert (response_.status_code, response_.content, route.call_count) == (200, other, 1)


# --- what memory knows -------------------------------------------------------------------------------------------


async def test_the_retry_keeps_the_reasoning_memory_captured_for_this_key(upstream) -> None:
    minted = [REASONING, CALL, CUSTOM]  # ACCEPTED's output: minted for this client's key, and captured
    switched = body_of([USER, FOREIGN, CALL_1, output("call_1"), *minted, output(CALL["call_id"]), output(CUSTOM["call_id"], kind="custom_tool_call_output")],
                       tools=TOOLS)
    route = scripted(upstream, "/responses", accepted(), refusal(), accepted(), accepted())
    async with running_proxy() as proxy:
        assert (await proxy.client.post(PATH, json=LOOP, headers=AUTH)).status_code == 200
        response_ = await proxy.client.post(PATH, json=switched, headers=AUTH)
        assert response_.status_code == 200 and response_.headers["x-toolmend-repairs"] == "TM408=1,TM405=1"
        retry = orjson.loads(sent(route)[2])
        assert encrypted_reasoning(retry) == [REASONING]  # only the foreign reasoning went
        # Remembered: the next request leaves FOREIGN out before it is sent, and keeps REASONING.
        assert (await proxy.client.post(PATH, json=switched, headers=AUTH)).headers["x-toolmend-repairs"] == "TM408=1,TM405=1"
    assert route.call_count == 4 and orjson.loads(sent(route)[3]) == retry
