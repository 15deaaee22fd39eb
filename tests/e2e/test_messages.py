"""End to end on Anthropic's Messages API: the official ``anthropic`` client -> toolmend under uvicorn -> the strict
scripted Claude upstream (``tests/support/messages_upstream.py``: Anthropic's texts, signed thinking it checks), all on
loopback.

* An agent loop that drops its ``tool_use`` blocks every turn (it keeps its text and sends the ``tool_result``s) works
  through toolmend, whether the client asks for JSON, reads ``create(stream=True)`` events or uses ``messages.stream``,
  thinking off or on: every request is accepted, and the upstream gets back exactly the assistant turns it emitted,
  thinking with its signature first and byte for byte.
* A client that keeps everything reaches the upstream as its own bytes; one that drops only the thinking gets the
  latest turn's thinking back as the upstream emitted it (AM-9, AM-13).
* A turn cancelled mid-tool (ESC) gets ``is_error`` results first in the next user message (AM-1); a window cut by
  trimming, so that results lead or lost their ``tool_use``, is repaired from memory (AM-4).
* ``anthropic-version``, ``anthropic-beta`` and the client's key go upstream as sent; with an operator key the client
  presents a toolmend key and the upstream gets the operator's, in the carrier the client used. ``count_tokens`` is repaired
  like ``/v1/messages`` (a valid one arrives as sent), ``GET /v1/models`` passes through; a route prefix serves Anthropic clients beside chat ones. Errors are Anthropic's
  envelope; a lone surrogate is mended (AM-21). Memory is per key.
* A thinking signature the upstream refuses (AM-14: bound to another system prompt) is dropped and the request sent
  once more (TM513); under ``--thinking-policy reject`` the refusal comes back as the upstream sent it. A session
  resumed under another key pays that one refused round trip, not one per request.
* count_tokens is repaired like /v1/messages and follows the same model route (found as a bug, now pinned as a test).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from proxy.config import Settings
from proxy.dialects.messages.blocks import is_thinking
from proxy.repair import DEFAULT_PLACEHOLDER
from proxy.routes import RouteSpec
from tests.support.client_tls import TLS
from tests.support.lazy import lazy
from tests.support.messages_agent import (
    MODES,
    Carrier,
    Mode,
    Wire,
    arrived_as_emitted,
    ask,
    assistant_contents,
    encoded_as_emitted,
    kept,
    results_for,
    text_of,
    text_only,
    tool_uses,
)
from tests.support.messages_upstream import DEFAULT_MODEL, MessagesRecorder, make_messages_upstream
from tests.support.messages_validator import Profile as ServerProfile
from tests.support.processes import free_port
from tests.support.served import proxy_fixture, served_fixtures
from tests.support.strict_upstream import serve

anthropic = lazy("anthropic")

#: The radius's bound is a float the SDK writes as ``1e-07`` and orjson as ``1e-7``: a body toolmend parsed and encoded
#: again is never the client's bytes, so every byte-for-byte check below can fail.
TOOLS: list[Any] = [
    {"name": "weather", "description": "Weather for a city", "input_schema": {
        "type": "object", "properties": {"city": {"type": "string"}, "radius_km": {"type": "number", "exclusiveMinimum": 1e-07}}}},
    {"name": "time", "description": "Local time in a city", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
]
TURNS = 3
MANUAL = {"type": "enabled", "budget_tokens": 1024}
#: A request's thinking: off, or manual (the upstream then opens every new answer with signed and redacted thinking).
THINKING: dict[str, dict[str, Any]] = {"thinking-off": {}, "thinking-on": {"thinking": MANUAL}}
CARRIERS: tuple[Carrier, ...] = ("authorization", "x-api-key")
CREDENTIAL_HEADERS = ("authorization", "api-key", "x-api-key", "x-goog-api-key")
OPERATOR_KEY = "sk-ant-operator-0123456789"
TOOLMEND_KEY = "tm-client-key-0123456789"
BETAS = "interleaved-thinking-2025-05-14,context-1m-2025-08-07"
#: Anthropic's texts (docs/provider-rules.md section 6.1) for the histories toolmend repairs here.
AM1 = "`tool_use` ids were found without `tool_result` blocks immediately after"
AM4 = "unexpected `tool_use_id` found in `tool_result` blocks"
AM9 = "Expected `thinking` or `redacted_thinking`, but found `text`"


upstream, rec = served_fixtures(lambda: make_messages_upstream(seed=17, redacted=True))
proxy = proxy_fixture()
rejecting_proxy = proxy_fixture("rejecting_proxy", orphan_policy="reject")
thinking_rejecting_proxy = proxy_fixture("thinking_rejecting_proxy", thinking_policy="reject")


@pytest.fixture(scope="module")
def keyed_proxy(upstream: tuple[str, MessagesRecorder]) -> Iterator[str]:
    """A route that sends the operator's key upstream, and admits clients presenting a toolmend key."""
    settings = Settings(upstream=upstream[0] + "/v1", upstream_api_key=OPERATOR_KEY, api_keys=frozenset({TOOLMEND_KEY}))
    with serve(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def unreachable_proxy() -> Iterator[str]:
    with serve(create_app(Settings(upstream=f"http://127.0.0.1:{free_port()}/v1"))) as url:
        yield url


@pytest.fixture
def wire() -> Wire:
    return Wire()


def user(content: Any) -> Any:  # a message as JSON: what the SDK takes for its MessageParam
    return {"role": "user", "content": content}


def assistant(content: Any) -> Any:
    return {"role": "assistant", "content": content}


def request(history: list[Any], **fields: Any) -> dict[str, Any]:
    return {"model": DEFAULT_MODEL, "max_tokens": 2048, "messages": history, "tools": TOOLS, **fields}


def refused_directly(upstream_url: str, rec: MessagesRecorder, text: str, **body: Any) -> int:
    """The premise of a repair test: sent straight to the upstream, the request is refused with Anthropic's ``text``.
    Answers how many refusals the upstream has recorded, so a test can tell that none came after."""
    direct = anthropic.Anthropic(base_url=upstream_url, api_key="sk-ant-direct", max_retries=0,
                                 http_client=anthropic.DefaultHttpxClient(verify=TLS))
    with pytest.raises(anthropic.BadRequestError) as refused:
        direct.messages.create(**body)
    assert isinstance(refused.value.body, dict) and text in refused.value.body["error"]["message"]
    return len(rec.rejections)


def error_of(exc: anthropic.APIStatusError, kind: str) -> str:
    """The message of an error in Anthropic's envelope, checking the envelope exactly on the way."""
    body = exc.body
    assert isinstance(body, dict) and set(body) == {"type", "error"} and body["type"] == "error"
    assert set(body["error"]) == {"type", "message"} and body["error"]["type"] == kind
    message = body["error"]["message"]
    assert isinstance(message, str) and message
    return message


def credentials_of(headers: Any) -> dict[str, str]:
    return {name: headers[name] for name in CREDENTIAL_HEADERS if name in headers}


def bearer_or_plain(carrier: Carrier, key: str) -> str:
    return f"Bearer {key}" if carrier == "authorization" else key


# --------------------------------------------------------------------------------------------------
# agent loops
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("thinking", THINKING)
@pytest.mark.parametrize("mode", MODES)
def test_a_loop_that_drops_its_tool_use_blocks_gets_back_exactly_what_the_upstream_emitted(proxy: str, rec: MessagesRecorder, wire: Wire,
                                                                                          mode: Mode, thinking: str) -> None:
    fields = THINKING[thinking]
    client = wire.client(proxy, f"sk-ant-forgetful-{mode}-{thinking}")
    history: list[dict[str, Any]] = []
    for turn in range(TURNS):
        history.append(user(f"Question {turn}"))
        answer = ask(client, mode, **request(history, **fields))
        opening = ["thinking", "redacted_thinking"] if fields else []
        assert [block.type for block in answer.content] == [*opening, "text", "tool_use", "tool_use"]
        assert kept(answer) == rec.emitted_turns[-1]  # the client read what was sent, however it read it
        history += [text_only(answer), results_for(answer)]  # the thinking and both calls are dropped, every turn
        final = ask(client, mode, **request(history, **fields))
        assert [block.type for block in final.content] == ["text"] and text_of(final) == "Received 2 tool results."
        # Every earlier turn's results are orphans again: one re-insertion of a whole parallel turn per turn so far.
        assert wire.last.headers["x-toolmend-repairs"] == f"TM101={turn + 1}"
        assert wire.last.headers["x-toolmend-calls"] == f"recalled={2 * (turn + 1)},synthesized=0"
        arrived_as_emitted(rec.last, rec.emitted_turns)
        history.append(assistant(text_of(final)))
    assert rec.rejections == []
    assert len(rec.requests) == 2 * TURNS
    first = wire.posts()[0]
    assert "x-toolmend-repairs" not in first.headers and rec.requests[0].body_bytes == first.sent


@pytest.mark.parametrize("thinking", THINKING)
@pytest.mark.parametrize("mode", MODES)
def test_a_loop_that_keeps_everything_arrives_byte_identical(proxy: str, rec: MessagesRecorder, wire: Wire, mode: Mode, thinking: str) -> None:
    fields = THINKING[thinking]
    client = wire.client(proxy, f"sk-ant-faithful-{mode}-{thinking}")
    history: list[dict[str, Any]] = []
    for turn in range(2):
        history.append(user(f"Question {turn}"))
        answer = ask(client, mode, **request(history, **fields))
        history += [assistant(kept(answer)), results_for(answer)]
        final = ask(client, mode, **request(history, **fields))
        assert text_of(final) == "Received 2 tool results."
        history.append(assistant(kept(final)))
    assert rec.rejections == [] and len(wire.posts()) == 4
    assert [exchange.sent for exchange in wire.posts()] == [received.body_bytes for received in rec.requests]
    assert all("x-toolmend-repairs" not in exchange.headers for exchange in wire.posts())


def test_the_latest_thinking_a_client_dropped_comes_back_as_the_upstream_emitted_it(upstream: tuple[str, MessagesRecorder], proxy: str,
                                                                                    rec: MessagesRecorder, wire: Wire) -> None:
    client = wire.client(proxy, "sk-ant-no-thinking")
    history = [user("Weather and time in Paris?")]
    raw = client.messages.with_raw_response.create(**request(history, thinking=MANUAL))
    emitted_bytes, answer = raw.http_response.content, raw.parse()
    # A client that stores no thinking: its text and calls, in their order.
    history += [assistant([block for block in kept(answer) if not is_thinking(block)]), results_for(answer)]
    refusals = refused_directly(upstream[0], rec, AM9, **request(history, thinking=MANUAL))
    final = ask(client, "create", **request(history, thinking=MANUAL))
    assert text_of(final) == "Received 2 tool results."
    assert wire.last.headers["x-toolmend-repairs"] == "TM510=1"
    assert rec.last.json["thinking"] == MANUAL  # put back from memory, not turned off for the request
    [emitted] = rec.emitted_turns
    assert assistant_contents(rec.last) == [emitted]  # thinking first again, then the client's text and calls
    thinking = [block for block in emitted if is_thinking(block)]
    assert [block["type"] for block in thinking] == ["thinking", "redacted_thinking"]
    for block in thinking:  # the block's bytes in the answer the upstream sent are the bytes it received back
        encoded = orjson.dumps(block)
        assert encoded in emitted_bytes and encoded in rec.last.body_bytes
    assert len(rec.rejections) == refusals


def test_the_latest_thinking_the_client_kept_is_its_own_when_an_older_turn_is_repaired(proxy: str, rec: MessagesRecorder, wire: Wire) -> None:
    client = wire.client(proxy, "sk-ant-latest-kept")
    history = [user("Weather and time in Paris?")]
    first = ask(client, "create", **request(history, thinking=MANUAL))
    history += [text_only(first), results_for(first)]  # the first turn forgotten
    history.append(assistant(text_of(ask(client, "create", **request(history, thinking=MANUAL)))))
    history.append(user("And in Tokyo?"))
    second = ask(client, "stream-helper", **request(history, thinking=MANUAL))
    history += [assistant(kept(second)), results_for(second)]  # the second turn kept, in the SDK's key order
    ask(client, "create", **request(history, thinking=MANUAL))
    assert wire.last.headers["x-toolmend-repairs"] == "TM101=1"  # the body is toolmend's encoding now
    assert rec.rejections == []
    latest = assistant_contents(rec.last)[-1]
    assert latest == kept(second) and list(latest[0]) == list(kept(second)[0])  # the client's own blocks, keys in its order
    for block in kept(second)[:2]:  # the thinking bytes the client sent are the bytes the upstream got
        encoded = orjson.dumps(block)
        assert encoded in wire.last.sent and encoded in rec.last.body_bytes


@pytest.mark.parametrize("thinking", THINKING)
def test_a_turn_cancelled_mid_tool_gets_error_results_first_in_the_next_user_message(upstream: tuple[str, MessagesRecorder], proxy: str,
                                                                                    rec: MessagesRecorder, wire: Wire, thinking: str) -> None:
    fields = THINKING[thinking]
    client = wire.client(proxy, f"sk-ant-esc-{thinking}")
    history = [user("Check the weather and the time in Paris")]
    answer = ask(client, "create", **request(history, **fields))
    # ESC: the user interrupts before the tools ran; the next message is the user's, without any tool_result.
    history += [assistant(kept(answer)), user("Stop. Never mind the lookups.")]
    refusals = refused_directly(upstream[0], rec, AM1, **request(history, **fields))
    final = ask(client, "stream-helper", **request(history, **fields))
    assert text_of(final) == "Received 2 tool results."
    assert wire.last.headers["x-toolmend-repairs"] == "TM104=2"
    assert "x-toolmend-calls" not in wire.last.headers  # nothing put back, only results added
    received = rec.last.json["messages"]
    assert received[:2] == history[:2]
    placeholders = [{"type": "tool_result", "tool_use_id": call["id"], "content": DEFAULT_PLACEHOLDER, "is_error": True}
                    for call in tool_uses(answer)]
    assert received[2:] == [user([*placeholders, {"type": "text", "text": "Stop. Never mind the lookups."}])]
    assert len(rec.rejections) == refusals


#: Windows cut by trimming, from [Q0, A0, R0, F0, Q1, A1, R1] (question, tool turn, results, final text): results
#: that lead the history, results after a summary that replaced what was cut, an earlier turn's results that lead.
CUTS: dict[str, tuple[int, list[dict[str, Any]], int]] = {
    "current-results-lead": (6, [], 1),
    "summary-then-current-results": (6, [user("Summary: the user asked about Paris, then Tokyo.")], 1),
    "earlier-results-lead": (2, [], 0),
}


@pytest.mark.parametrize("cut", CUTS)
def test_a_window_cut_by_trimming_is_repaired_from_memory(upstream: tuple[str, MessagesRecorder], proxy: str, rec: MessagesRecorder,
                                                          wire: Wire, cut: str) -> None:
    start, summary, lost = CUTS[cut]
    client = wire.client(proxy, f"sk-ant-trimmed-{cut}")
    history: list[dict[str, Any]] = []
    for question in ("Weather in Paris?", "Weather in Tokyo?"):
        history.append(user(question))
        answer = ask(client, "create", **request(history, thinking=MANUAL))
        history += [assistant(kept(answer)), results_for(answer)]
        if len(history) < 7:
            history.append(assistant(text_of(ask(client, "create", **request(history, thinking=MANUAL)))))
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    window = [*summary, *history[start:]]
    refusals = refused_directly(upstream[0], rec, AM4, **request(window, thinking=MANUAL))
    final = ask(client, "create", **request(window, thinking=MANUAL))
    assert text_of(final) == "Received 2 tool results."
    # The lost turn goes back right before its results, as the upstream emitted it; everything else as the client sent
    # it. When that would open the history with the assistant, a short user message goes first (TM515).
    opening = [] if summary else [user([{"type": "text", "text": "(earlier conversation omitted)"}])]
    repairs = "TM101=1" if summary else "TM101=1,TM515=1"
    assert (wire.last.headers["x-toolmend-repairs"], wire.last.headers["x-toolmend-calls"]) == (repairs, "recalled=2,synthesized=0")
    assert rec.last.json["messages"] == [*opening, *summary, assistant(rec.emitted_turns[lost]), *history[start:]]
    encoded_as_emitted(rec.last, rec.emitted_turns[lost])
    assert len(rec.rejections) == refusals


@pytest.mark.parametrize("server", ["deepseek", "kimi"])
def test_an_anthropic_compatible_upstream_gets_its_unsigned_thinking_back_on_the_deepseek_profile(wire: Wire, server: ServerProfile) -> None:
    """DeepSeek's and Kimi's Anthropic endpoints sign no thinking (no ``signature``, or ``""``) and want it kept: on a
    ``deepseek`` route it is remembered and put back as it came, and a faithful client's goes through untouched."""
    app, rec = make_messages_upstream(seed=23, profile=server)
    with serve(app) as url, serve(create_app(Settings(upstream=url + "/v1", profile="deepseek"))) as proxy:
        client = wire.client(proxy, f"sk-{server}")
        history = [user("Weather and time in Paris?")]
        answer = ask(client, "stream-helper", **request(history, thinking=MANUAL))
        [emitted] = rec.emitted_turns
        assert emitted[0]["type"] == "thinking" and emitted[0].get("signature", "") == ""
        forgetful = [*history, text_only(answer), results_for(answer)]
        ask(client, "create", **request(forgetful, thinking=MANUAL))
        assert (wire.last.headers["x-toolmend-repairs"], wire.last.headers["x-toolmend-calls"]) == ("TM101=1", "recalled=2,synthesized=0")
        assert rec.last.json["thinking"] == MANUAL
        arrived_as_emitted(rec.last, [emitted])
        faithful = [*history, assistant(kept(answer)), results_for(answer)]
        ask(client, "create-stream", **request(faithful, thinking=MANUAL))
        assert "x-toolmend-repairs" not in wire.last.headers and rec.last.body_bytes == wire.last.sent
        assert assistant_contents(rec.last) == [emitted]
        assert rec.rejections == []


# --------------------------------------------------------------------------------------------------
# headers, keys, tenants
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("carrier", CARRIERS)
def test_anthropic_headers_and_the_client_s_own_key_go_upstream_as_sent(proxy: str, rec: MessagesRecorder, wire: Wire, carrier: Carrier) -> None:
    key = f"sk-ant-own-{carrier}"
    client = wire.client(proxy, key, carrier, default_headers={"anthropic-beta": BETAS})
    history = [user("Go")]
    answer = client.messages.create(**request(history))
    history += [text_only(answer), results_for(answer)]
    # Repaired (on the query Claude Code adds to its beta requests): the headers go along all the same.
    client.messages.create(**request(history), extra_query={"beta": "true"})
    assert wire.last.query == "beta=true" and wire.last.headers["x-toolmend-repairs"] == "TM101=1"
    client.beta.messages.create(**request([user("Hi")]), betas=["fine-grained-tool-streaming-2025-05-14"])
    assert len(rec.requests) == len(wire.posts()) == 3 and rec.rejections == []
    for sent, received in zip(wire.posts(), rec.requests, strict=True):
        for name in ("anthropic-version", "anthropic-beta"):
            assert received.headers[name] == sent.request_headers[name]
        assert credentials_of(received.headers) == {carrier: bearer_or_plain(carrier, key)}
    assert rec.last.headers["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14"
    assert rec.requests[0].headers["anthropic-beta"] == BETAS


@pytest.mark.parametrize("carrier", CARRIERS)
def test_with_an_operator_key_the_client_presents_a_toolmend_key_and_the_upstream_gets_the_operator_s(keyed_proxy: str, rec: MessagesRecorder,
                                                                                                     wire: Wire, carrier: Carrier) -> None:
    client = wire.client(keyed_proxy, TOOLMEND_KEY, carrier)
    history = [user("Go")]
    answer = client.messages.create(**request(history))
    history += [text_only(answer), results_for(answer)]
    client.messages.create(**request(history))
    assert wire.last.headers["x-toolmend-calls"] == "recalled=2,synthesized=0"  # memory works on a keyed route too
    client.messages.count_tokens(model=DEFAULT_MODEL, messages=[user("Go")])
    client.models.list()
    assert [received.path for received in rec.requests] == ["/v1/messages", "/v1/messages", "/v1/messages/count_tokens", "/v1/models"]
    for received in rec.requests:  # the operator's key only, in the carrier the client used; toolmend's key never
        assert credentials_of(received.headers) == {carrier: bearer_or_plain(carrier, OPERATOR_KEY)}
        assert all(TOOLMEND_KEY not in value for value in received.headers.values())
    assert rec.rejections == []

    stranger = wire.client(keyed_proxy, "sk-ant-not-a-toolmend-key", carrier)
    with pytest.raises(anthropic.AuthenticationError) as denied:
        stranger.messages.create(**request([user("Go")]))
    assert denied.value.status_code == 401 and "x-api-key" in error_of(denied.value, "authentication_error")
    assert len(rec.requests) == 4  # never forwarded


@pytest.mark.parametrize("carrier", CARRIERS)
def test_two_keys_do_not_recall_each_other_s_calls(proxy: str, rec: MessagesRecorder, wire: Wire, carrier: Carrier) -> None:
    owner = wire.client(proxy, f"sk-ant-tenant-one-{carrier}", carrier)
    history = [user("Go")]
    answer = owner.messages.create(**request(history))
    replay = [*history, text_only(answer), results_for(answer, "stolen?")]
    other = wire.client(proxy, f"sk-ant-tenant-two-{carrier}", carrier)
    other.messages.create(**request(replay))
    assert (wire.last.headers["x-toolmend-repairs"], wire.last.headers["x-toolmend-calls"]) == ("TM101=2", "recalled=0,synthesized=2")
    sent = assistant_contents(rec.last)[-1]  # the calls put in front of the results: made up, not tenant one's
    assert [block["id"] for block in sent if block["type"] == "tool_use"] == [call["id"] for call in tool_uses(answer)]
    assert all(block["input"] == {} for block in sent if block["type"] == "tool_use")
    assert all(orjson.dumps(call) not in rec.last.body_bytes for call in tool_uses(answer))
    owner.messages.create(**request(replay))  # the owner's own key finds them
    assert wire.last.headers["x-toolmend-calls"] == "recalled=2,synthesized=0"
    arrived_as_emitted(rec.last, rec.emitted_turns)


def test_count_tokens_of_a_forgetful_history_is_repaired_like_its_messages(proxy: str, rec: MessagesRecorder, wire: Wire) -> None:
    # Claude Code counts the history it is about to send: a count the upstream refuses (AM-4) would stop it as surely.
    client = wire.client(proxy, "sk-ant-count-forgetful")
    answer = client.messages.create(**request([user("Go")]))
    history: list[Any] = [user("Go"), text_only(answer), results_for(answer)]
    counted = client.messages.count_tokens(model=DEFAULT_MODEL, messages=history, tools=TOOLS)
    assert rec.last.path == "/v1/messages/count_tokens" and rec.rejections == []
    assert wire.last.headers["x-toolmend-repairs"] == "TM101=1" and counted.input_tokens > 0
    arrived_as_emitted(rec.last, rec.emitted_turns)


def test_count_tokens_and_models_pass_through_untouched(proxy: str, rec: MessagesRecorder, wire: Wire) -> None:
    client = wire.client(proxy, "sk-ant-passthrough")
    answer = client.messages.create(**request([user("Go")]))
    history: list[Any] = [user("Go"), assistant(kept(answer)), results_for(answer)]
    counted = client.messages.count_tokens(model=DEFAULT_MODEL, messages=history, tools=TOOLS)
    assert (wire.last.path, rec.last.path) == ("/v1/messages/count_tokens", "/v1/messages/count_tokens")
    assert rec.last.body_bytes == wire.last.sent and "x-toolmend-repairs" not in wire.last.headers
    assert counted.input_tokens == max(1, len(wire.last.sent) // 4)  # the upstream's count of the client's bytes
    models = client.models.list()
    assert [model.id for model in models.data] == [DEFAULT_MODEL]
    assert (rec.last.path, rec.last.body_bytes) == ("/v1/models", b"")
    assert rec.last.headers["anthropic-version"] == wire.last.request_headers["anthropic-version"]


def test_a_route_prefix_serves_anthropic_clients_beside_the_default_route(upstream: tuple[str, MessagesRecorder], rec: MessagesRecorder,
                                                                         wire: Wire) -> None:
    """One toolmend for chat clients (the default route) and Anthropic clients (``ANTHROPIC_BASE_URL=<toolmend>/claude``):
    under the prefix, /v1/messages and count_tokens go to the prefix's upstream (a valid count as sent)."""
    settings = Settings(upstream=f"http://127.0.0.1:{free_port()}/v1", routes=(RouteSpec(upstream=upstream[0] + "/v1", prefix="/claude"),))
    with serve(create_app(settings)) as url:
        client = wire.client(url + "/claude", "sk-ant-prefixed")
        answer = ask(client, "stream-helper", **request([user("Go")], thinking=MANUAL))
        history = [user("Go"), text_only(answer), results_for(answer)]
        ask(client, "create-stream", **request(history, thinking=MANUAL))
        assert (wire.last.path, wire.last.headers["x-toolmend-calls"]) == ("/claude/v1/messages", "recalled=2,synthesized=0")
        arrived_as_emitted(rec.last, rec.emitted_turns)
        client.messages.count_tokens(model=DEFAULT_MODEL, messages=[user("Go")])
        assert (rec.last.path, rec.last.body_bytes) == ("/v1/messages/count_tokens", wire.last.sent)
        assert rec.rejections == []


def test_count_tokens_follows_the_model_route_of_its_messages(upstream: tuple[str, MessagesRecorder], rec: MessagesRecorder, wire: Wire) -> None:
    settings = Settings(upstream=f"http://127.0.0.1:{free_port()}/v1", routes=(RouteSpec(upstream=upstream[0] + "/v1", model="claude-*"),))
    with serve(create_app(settings)) as url:
        client = wire.client(url, "sk-ant-model-routed")
        client.messages.create(**request([user("Go")]))
        assert rec.last.path == "/v1/messages"  # the model route
        counted = client.messages.count_tokens(model=DEFAULT_MODEL, messages=[user("Go")])
        assert rec.last.path == "/v1/messages/count_tokens" and counted.input_tokens == max(1, len(wire.last.sent) // 4)


# --------------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------------


def test_an_orphan_under_the_reject_policy_is_a_bad_request_in_anthropic_s_envelope(rejecting_proxy: str, rec: MessagesRecorder, wire: Wire) -> None:
    client = wire.client(rejecting_proxy, "sk-ant-rejected")
    orphan = "toolu_NeverMadeByTheUpstream01"
    history = [user("Go"), assistant("Looking."), user([{"type": "tool_result", "tool_use_id": orphan, "content": "18C"}])]
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(**request(history))
    assert refused.value.status_code == 400
    message = error_of(refused.value, "invalid_request_error")
    assert message.startswith("toolmend TM101 (orphan-tool-message) at messages.2: ")
    assert orphan in message and "--orphan-policy" in message
    assert rec.requests == []  # never forwarded


@pytest.mark.parametrize("mode", MODES)
def test_an_unreachable_upstream_is_a_502_in_anthropic_s_envelope(unreachable_proxy: str, wire: Wire, mode: Mode) -> None:
    client = wire.client(unreachable_proxy, "sk-ant-nowhere")
    with pytest.raises(anthropic.InternalServerError) as failed:
        ask(client, mode, **request([user("Go")]))
    assert failed.value.status_code == 502
    assert "could not be reached" in error_of(failed.value, "api_error")


def test_an_upstream_refusal_comes_back_as_the_upstream_sent_it(thinking_rejecting_proxy: str, rec: MessagesRecorder, wire: Wire) -> None:
    client = wire.client(thinking_rejecting_proxy, "sk-ant-forged")
    forged = {"type": "thinking", "thinking": "I made this up.", "signature": "Zm9yZ2Vk"}  # toolmend cannot know it is forged
    history = [user("Go"), assistant([forged, {"type": "text", "text": "Hi."}]), user("Again")]
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(**request(history, thinking=MANUAL))
    # Thinking policy reject: the refusal of the signature is not retried (under drop it is, TM513).
    assert len(rec.requests) == 1 and rec.last.body_bytes == wire.last.sent and "x-toolmend-repairs" not in wire.last.headers
    assert refused.value.body == rec.rejections[-1]  # with the upstream's request_id
    assert re.fullmatch(r"messages\.1\.content\.0: Invalid `signature` in `thinking` block.*", refused.value.body["error"]["message"])
    assert wire.last.headers["request-id"] == rec.rejections[-1]["request_id"]


def test_a_thinking_signature_the_upstream_refuses_once_is_dropped_and_the_call_succeeds(wire: Wire) -> None:
    """AM-14, the 2026-09 binding: the strict upstream binds each signature to the ``system`` prompt it was minted
    under, and the client switched to another (a channel or model switch) in the middle of its tool loop. toolmend
    cannot tell; the upstream refuses once, toolmend sends the same request without its thinking (and, the tool
    turn no longer starting with thinking, without ``thinking``), and each way the SDK asks gets its answer."""
    app, rec = make_messages_upstream(seed=31, redacted=True, bind_system=True)
    with serve(app) as url, serve(create_app(Settings(upstream=url + "/v1"))) as proxy:
        for mode in MODES:
            client = wire.client(proxy, f"sk-ant-switched-{mode}")
            history = [user("Weather and time in Paris?")]
            answer = ask(client, mode, **request(history, thinking=MANUAL, system="You are agent A."))
            history += [assistant(kept(answer)), results_for(answer)]
            switched = request(history, thinking=MANUAL, system="You are agent B.")
            refusals = refused_directly(url, rec, "The block is bound to a different conversation", **switched)
            final = ask(client, mode, **switched)
            assert text_of(final) == "Received 2 tool results."
            assert wire.last.headers["x-toolmend-repairs"] == "TM513=1,TM510=1"
            assert len(rec.rejections) == refusals + 1  # refused once through toolmend, then accepted
            first, retried = rec.requests[-2:]
            assert first.body_bytes == wire.last.sent  # the client's own bytes went first
            assert "thinking" not in retried.json and retried.json["system"] == "You are agent B."
            assert assistant_contents(retried) == [[block for block in kept(answer) if not is_thinking(block)]]


def test_a_session_resumed_under_another_key_pays_one_refused_round_trip(wire: Wire) -> None:
    """A Claude Code session resumed under another API key: every signature of the first key's turns is foreign to the
    second (AM-14). The first request of the second key is refused once and sent again without that thinking (TM513);
    toolmend remembers what was refused, and the next requests leave it out before they are sent (TM513 again, the
    upstream asked nothing), keeping the thinking minted for the second key: three requests, four upstream calls."""
    app, rec = make_messages_upstream(seed=37, redacted=True, per_key=True)
    with serve(app) as url, serve(create_app(Settings(upstream=url + "/v1"))) as proxy:
        before = wire.client(proxy, "sk-ant-first-account")
        history = [user("Weather and time in Paris?")]
        answer = ask(before, "create", **request(history, thinking=MANUAL))
        history += [assistant(kept(answer)), results_for(answer)]
        history.append(assistant(kept(ask(before, "create", **request(history, thinking=MANUAL)))))
        foreign = [block for block in kept(answer) if is_thinking(block)]
        after = wire.client(proxy, "sk-ant-second-account")
        calls, refusals = len(rec.requests), len(rec.rejections)
        history.append(user("And in Lyon?"))
        answer = ask(after, "create", **request(history, thinking=MANUAL))  # refused once, retried
        assert wire.last.headers["x-toolmend-repairs"] == "TM513=1" and len(rec.rejections) == refusals + 1
        history += [assistant(kept(answer)), results_for(answer)]
        final = ask(after, "create", **request(history, thinking=MANUAL))  # the tool turn ends, the new thinking kept
        assert text_of(final) == "Received 2 tool results." and wire.last.headers["x-toolmend-repairs"] == "TM513=1"
        history += [assistant(kept(final)), user("Thanks. And Nice?")]
        ask(after, "create", **request(history, thinking=MANUAL))
        assert wire.last.headers["x-toolmend-repairs"] == "TM513=1"
        assert (len(rec.requests) - calls, len(rec.rejections) - refusals) == (4, 1)
        sent_thinking = [[block for content in assistant_contents(received) for block in content if is_thinking(block)]
                         for received in rec.requests[calls + 2:]]
        minted_here = [block for block in kept(answer) if is_thinking(block)]
        assert sent_thinking == [minted_here, minted_here] and not any(block in foreign for block in minted_here)


def test_a_lone_surrogate_is_forwarded_as_the_replacement_character(upstream: tuple[str, MessagesRecorder], proxy: str,
                                                                    rec: MessagesRecorder) -> None:
    # A tool output cut inside an emoji, as JSON.stringify writes it; the SDK would refuse to encode it, so it goes raw.
    body = (
        b'{"model": "claude-strict-test", "max_tokens": 64, "messages": ['
        b'{"role": "user", "content": "Read the log"},'
        b' {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_log01", "name": "read", "input": {}}]},'
        b' {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_log01", "content": "done \\ud83d"}]}]}'
    )
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "sk-ant-surrogate"}
    direct = httpx.post(upstream[0] + "/v1/messages", content=body, headers=headers, verify=TLS)
    assert direct.status_code == 400 and "no low surrogate in string" in direct.json()["error"]["message"]
    answer = httpx.post(proxy + "/v1/messages", content=body, headers=headers, verify=TLS)
    assert answer.status_code == 200 and answer.json()["content"] == [{"type": "text", "text": "Received 1 tool result."}]
    assert answer.headers["x-toolmend-repairs"] == "TM512=1"
    assert rec.last.body_bytes == body.replace(b"\\ud83d", b"\\ufffd")  # nothing else moved
    assert rec.last.json["messages"][2]["content"][0]["content"] == "done \ufffd"
    assert rec.last.headers["x-api-key"] == "sk-ant-surrogate"


def test_a_body_that_is_not_json_is_refused_in_anthropic_s_envelope(proxy: str, rec: MessagesRecorder) -> None:
    answer = httpx.post(proxy + "/v1/messages", content=b'{"messages": [', headers={"content-type": "application/json", "x-api-key": "sk-ant-x"}, verify=TLS)
    assert answer.status_code == 400
    assert answer.json()["type"] == "error" and answer.json()["error"]["type"] == "invalid_request_error"
    assert set(answer.json()["error"]) == {"type", "message"} and "could not parse the JSON body" in answer.json()["error"]["message"]
    assert rec.requests == []


@pytest.mark.parametrize("where", ["keyed-route-wrong-key", "unreachable-upstream"])
def test_toolmend_s_errors_on_count_tokens_are_in_anthropic_s_envelope(keyed_proxy: str, unreachable_proxy: str, wire: Wire, where: str) -> None:
    """What toolmend answers itself on count_tokens (a refused key, an upstream it cannot reach) is Anthropic's envelope,
    as on /v1/messages."""
    keyed = where == "keyed-route-wrong-key"
    client = wire.client(keyed_proxy if keyed else unreachable_proxy, "sk-ant-not-a-toolmend-key")
    with pytest.raises(anthropic.AuthenticationError if keyed else anthropic.InternalServerError) as failed:
        client.messages.count_tokens(model=DEFAULT_MODEL, messages=[user("Go")])
    assert failed.value.status_code == (401 if keyed else 502)
    error_of(failed.value, "authentication_error" if keyed else "api_error")
