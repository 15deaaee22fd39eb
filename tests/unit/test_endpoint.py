"""``POST /v1/chat/completions``: parse, recall, repair, forward, relay, remember; with respx as the upstream."""

import logging

import anyio
import httpx
import orjson
import pytest
import respx

from proxy.logs import TextFormatter
from proxy.app import create_app
from proxy.memory.inprocess import InProcessStore
from proxy.repair import DEFAULT_PLACEHOLDER
from proxy.turns import make_turn
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import (
    AUTH,
    CLIENT_KEY,
    UPSTREAM,
    AsgiCall,
    build_app,
    ScriptedStream,
    call,
    call_asgi,
    completion,
    error_of,
    make_settings,
    orphan_history,
    running_proxy,
    started,
    tenant_for,
)

PATH = "/v1/chat/completions"


def chat_route(upstream, answer=None, **kwargs):
    return upstream.post("/chat/completions").mock(
        return_value=answer if answer is not None else httpx.Response(200, json=completion(content="hi")), **kwargs
    )


# --- request path -------------------------------------------------------------------------------------


async def test_clean_request_is_forwarded_as_the_exact_bytes_sent(upstream):
    route = chat_route(upstream)
    # Odd spacing, key order and escapes: any re-serialization would change these bytes.
    body = b'{ "messages" : [ {"content": "caf\\u00e9  \\/ ok", "role": "user"} ],\n  "model":"m", "temperature": 1.0 }'
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, content=body, headers={**AUTH, "content-type": "application/json"})
    assert response.status_code == 200
    sent = route.calls.last.request
    assert sent.content == body
    assert sent.headers["content-length"] == str(len(body))
    assert "x-toolmend-repairs" not in response.headers


async def test_request_headers_pass_through_except_hop_by_hop_and_host(upstream):
    route = chat_route(upstream)
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    headers = [
        (b"authorization", f"Bearer {CLIENT_KEY}".encode()),
        (b"openai-organization", b"org-123"),
        (b"x-custom", b"kept"),
        (b"user-agent", b"agent/1.0"),
        (b"content-type", b"application/json"),
        (b"content-length", b"5"),  # wrong on purpose: the proxy must recompute it
        (b"connection", b"keep-alive"),
        (b"keep-alive", b"timeout=5"),
        (b"te", b"trailers"),
        (b"trailer", b"x-checksum"),
        (b"upgrade", b"websocket"),
        (b"proxy-authorization", b"Basic cHJveHk6c2VjcmV0"),
        (b"proxy-connection", b"keep-alive"),
    ]
    async with started(build_app(make_settings())) as app:
        asgi = AsgiCall()
        asgi.disconnect.set()
        await call_asgi(app, asgi, "POST", PATH, headers, [body])
    assert asgi.status == 200
    sent = route.calls.last.request
    assert sent.content == body
    assert sent.headers["authorization"] == f"Bearer {CLIENT_KEY}"  # the client's own key, unchanged
    assert sent.headers["openai-organization"] == "org-123"
    assert sent.headers["x-custom"] == "kept"
    assert sent.headers["user-agent"] == "agent/1.0"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["host"] == "upstream.test"
    assert sent.headers["content-length"] == str(len(body))
    for name in ("connection", "keep-alive", "te", "trailer", "upgrade", "proxy-authorization", "proxy-connection", "transfer-encoding"):
        assert name not in sent.headers, name


async def test_headers_named_by_connection_are_hop_by_hop_too(upstream):
    route = chat_route(upstream)
    headers = {**AUTH, "connection": "keep-alive, x-hop-private", "x-hop-private": "for-this-hop-only"}
    async with running_proxy() as proxy:
        await proxy.client.post(PATH, json={"messages": [{"role": "user", "content": "hi"}]}, headers=headers)
    assert "x-hop-private" not in route.calls.last.request.headers


async def test_query_string_goes_upstream_unchanged(upstream):
    route = chat_route(upstream)
    async with running_proxy() as proxy:
        await proxy.client.post(PATH + "?api-version=2024-10-21&x=a%2Fb", json={"messages": []}, headers=AUTH)
    assert route.calls.last.request.url.raw_path == b"/v1/chat/completions?api-version=2024-10-21&x=a%2Fb"


async def test_repaired_request_sends_the_remembered_calls_with_a_recomputed_length(upstream):
    route = chat_route(upstream)
    remembered = call("call_Xq3", arguments='{"city":  "Paris"}')
    async with running_proxy() as proxy:
        await proxy.state.store.remember(tenant_for(), [make_turn([remembered])])
        body = {"model": "m", "messages": orphan_history("call_Xq3")}
        response = await proxy.client.post(PATH, json=body, headers=AUTH)
    assert response.status_code == 200
    assert response.headers["x-toolmend-repairs"] == "TM101=1"
    sent = route.calls.last.request
    assert sent.headers["content-length"] == str(len(sent.content))
    messages = orjson.loads(sent.content)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert messages[1]["tool_calls"] == [remembered]
    assert b'"arguments":"{\\"city\\":  \\"Paris\\"}"' in sent.content  # the argument text, byte for byte


async def test_tool_calls_of_an_answer_are_remembered_and_restored_on_the_next_request(upstream):
    emitted = call("call_abc123", name="weather", arguments='{"city": "Oslo"}')
    route = chat_route(upstream)
    route.side_effect = [
        httpx.Response(200, json=completion([emitted])),
        httpx.Response(200, json=completion(content="done")),
    ]
    async with running_proxy() as proxy:
        first = await proxy.client.post(PATH, json={"messages": [{"role": "user", "content": "q"}]}, headers=AUTH)
        assert first.json()["choices"][0]["message"]["tool_calls"] == [emitted]
        history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "checking"},
                   {"role": "tool", "tool_call_id": "call_abc123", "content": "-3C"}]
        second = await proxy.client.post(PATH, json={"messages": history}, headers=AUTH)
    assert second.headers["x-toolmend-repairs"] == "TM101=1"
    messages = orjson.loads(route.calls.last.request.content)["messages"]
    assert messages[1] == {"role": "assistant", "content": "checking", "tool_calls": [emitted]}


async def test_memory_is_per_credential(upstream):
    route = chat_route(upstream)
    async with running_proxy() as proxy:
        await proxy.state.store.remember(tenant_for("sk-other-tenant"), [make_turn([call("call_shared", name="secret_tool")])])
        response = await proxy.client.post(PATH, json={"messages": orphan_history("call_shared")}, headers=AUTH)
    assert response.headers["x-toolmend-repairs"] == "TM101=1"
    messages = orjson.loads(route.calls.last.request.content)["messages"]
    # Nothing remembered for this tenant: the call is synthesized, the other tenant's call never leaks.
    assert messages[1]["tool_calls"][0]["function"] == {"name": "unknown_tool", "arguments": "{}"}


async def test_memory_is_per_upstream_for_the_same_credential():
    store = InProcessStore(ttl_seconds=60, max_entries=10)
    other = "http://other.test/v1"
    with respx.mock(assert_all_called=False) as mock:
        mock.post(UPSTREAM + "/chat/completions").mock(return_value=httpx.Response(200, json=completion([call("call_u1")])))
        to_other = mock.post(other + "/chat/completions").mock(return_value=httpx.Response(200, json=completion(content="x")))
        app_a = build_app(make_settings(), store=store)
        app_b = build_app(make_settings(upstream=other), store=store)
        async with started(app_a), started(app_b):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app_a), base_url="http://p") as a, \
                    httpx.AsyncClient(transport=httpx.ASGITransport(app=app_b), base_url="http://p") as b:
                await a.post(PATH, json={"messages": [{"role": "user", "content": "q"}]}, headers=AUTH)
                assert await store.recall(tenant_for(), ["call_u1"])
                await b.post(PATH, json={"messages": orphan_history("call_u1")}, headers=AUTH)
    sent = orjson.loads(to_other.calls.last.request.content)["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "unknown_tool"


# --- upstream-key mode --------------------------------------------------------------------------------

KEYED = dict(upstream_api_key="sk-proxy-own-upstream-key", api_keys=frozenset({"tm-key-1", "tm-key-2"}))


@pytest.mark.parametrize("key", ["tm-key-1", "tm-key-2"])
async def test_upstream_key_mode_sends_the_proxys_key(upstream, key):
    route = chat_route(upstream)
    async with running_proxy(make_settings(**KEYED)) as proxy:
        response = await proxy.client.post(
            PATH, json={"messages": []}, headers={"authorization": f"Bearer {key}", "api-key": key, "x-api-key": key}
        )
    assert response.status_code == 200
    sent = route.calls.last.request.headers
    assert sent.get_list("authorization") == ["Bearer sk-proxy-own-upstream-key"]
    assert "api-key" not in sent and "x-api-key" not in sent


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer wrong"}, {"authorization": "tm-key-1"},
                                     {"api-key": "tm-key-1"}, {"authorization": "Bearer tm-key-1x"}])
async def test_upstream_key_mode_refuses_clients_without_a_configured_key(upstream, headers):
    route = chat_route(upstream)
    async with running_proxy(make_settings(**KEYED)) as proxy:
        response = await proxy.client.post(PATH, json={"messages": []}, headers=headers)
    assert response.status_code == 401
    assert error_of(response)["code"] == "invalid_api_key"
    assert not route.called


# --- response path --------------------------------------------------------------------------------------


async def test_json_answer_status_headers_and_body_are_relayed_unchanged(upstream):
    raw = b'{"id":"chatcmpl-9",  "object":"chat.completion","choices":[] ,"x":"\\u00e9"}'
    answer = httpx.Response(
        200,
        content=raw,
        headers=[("content-type", "application/json"), ("x-request-id", "req_up_1"), ("openai-processing-ms", "42"),
                 ("set-cookie", "a=1"), ("set-cookie", "b=2"), ("connection", "close"), ("keep-alive", "timeout=5")],
    )
    chat_route(upstream, answer)
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)
    assert response.status_code == 200
    assert response.content == raw
    assert response.headers["x-request-id"] == "req_up_1"
    assert response.headers["openai-processing-ms"] == "42"
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert response.headers["content-length"] == str(len(raw))
    assert "connection" not in response.headers and "keep-alive" not in response.headers


async def test_json_answer_with_several_choices_remembers_each_turn(upstream):
    answer = completion([call("call_c0a"), call("call_c0b", name="time")], [call("call_c1", name="news")])
    chat_route(upstream, httpx.Response(200, json=answer))
    async with running_proxy() as proxy:
        await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)
        found = await proxy.state.store.recall(tenant_for(), ["call_c0b", "call_c1"])
    assert [c["id"] for c in found["call_c0b"]["tool_calls"]] == ["call_c0a", "call_c0b"]
    assert [c["id"] for c in found["call_c1"]["tool_calls"]] == ["call_c1"]


@pytest.mark.parametrize("status", [400, 429, 500, 503])
async def test_upstream_errors_pass_through_unchanged_and_are_not_remembered(upstream, status):
    raw = orjson.dumps({"error": {"message": "slow down", "type": "requests", "param": None, "code": "rate"},
                        "choices": [{"message": {"tool_calls": [call("call_err")]}}]})
    headers = {"content-type": "application/json", "retry-after": "7", "x-ratelimit-remaining-requests": "0"}
    chat_route(upstream, httpx.Response(status, content=raw, headers=headers))
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)
        assert await proxy.state.store.recall(tenant_for(), ["call_err"]) == {}
    assert response.status_code == status
    assert response.content == raw
    assert response.headers["retry-after"] == "7"
    assert response.headers["x-ratelimit-remaining-requests"] == "0"


# --- errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"", b"{", b'{"messages": [}', b"\xff\xfe", b"[]", b'"text"', b"42", b"null",
                                  b'[{"role": "user"}]'])
async def test_invalid_or_non_object_body_is_400_and_nothing_goes_upstream(upstream, body):
    route = chat_route(upstream)
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, content=body, headers=AUTH)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_json"
    assert not route.called


async def test_body_over_the_limit_is_413_by_declared_length(upstream):
    route = chat_route(upstream)
    async with running_proxy(make_settings(max_body_bytes=1024)) as proxy:
        at_limit = b'{"messages":[],"pad":"' + b"a" * (1024 - 24) + b'"}'
        assert len(at_limit) == 1024
        ok = await proxy.client.post(PATH, content=at_limit, headers=AUTH)
        too_big = await proxy.client.post(PATH, content=at_limit[:-2] + b'a"}', headers=AUTH)
    assert ok.status_code == 200
    assert too_big.status_code == 413
    assert error_of(too_big)["code"] == "request_too_large"
    assert route.call_count == 1


async def test_body_over_the_limit_is_413_when_streamed_without_a_length(upstream):
    route = chat_route(upstream)
    async with started(build_app(make_settings(max_body_bytes=1024))) as app:
        asgi = AsgiCall()
        asgi.disconnect.set()
        parts = [b'{"messages":[],"pad":"'] + [b"a" * 300] * 4 + [b'"}']
        with anyio.fail_after(HANG_GUARD):
            await call_asgi(app, asgi, "POST", PATH, [(b"transfer-encoding", b"chunked")], parts)
    assert asgi.status == 413
    assert orjson.loads(b"".join(asgi.body_chunks))["error"]["code"] == "request_too_large"
    assert not route.called


async def test_reject_policy_answers_400_naming_message_and_rule(upstream):
    route = chat_route(upstream)
    async with running_proxy(make_settings(orphan_policy="reject")) as proxy:
        response = await proxy.client.post(PATH, json={"messages": orphan_history("call_gone")}, headers=AUTH)
    assert response.status_code == 400
    error = error_of(response)
    assert "messages[1]" in error["message"] and "TM101" in error["message"] and "call_gone" in error["message"]
    assert error["param"] == "messages.[1]"
    assert error["code"] == "toolmend_orphan_tool_message"
    assert not route.called


async def test_reject_policy_still_restores_remembered_calls(upstream):
    route = chat_route(upstream)
    async with running_proxy(make_settings(orphan_policy="reject")) as proxy:
        await proxy.state.store.remember(tenant_for(), [make_turn([call("call_known")])])
        response = await proxy.client.post(PATH, json={"messages": orphan_history("call_known")}, headers=AUTH)
    assert response.status_code == 200
    assert orjson.loads(route.calls.last.request.content)["messages"][1]["tool_calls"] == [call("call_known")]


async def test_malformed_message_is_rejected_before_upstream(upstream):
    route = chat_route(upstream)
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json={"messages": [{"role": "user", "content": "hi"}, "hello"]}, headers=AUTH)
    assert response.status_code == 400
    error = error_of(response)
    assert "TM200" in error["message"] and "messages[1]" in error["message"]
    assert not route.called


@pytest.mark.parametrize("default_transport", [True, False], ids=["app-default-transport", "httpx-transport"])
async def test_upstream_unreachable_is_502(default_transport):
    # Port 1 on loopback: nothing listens there, the connection is refused at once.
    settings = make_settings(upstream="http://127.0.0.1:1/v1")
    app = create_app(settings) if default_transport else build_app(settings)
    async with started(app), httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://p") as client:
        response = await client.post(PATH, json={"messages": []}, headers=AUTH)
    assert response.status_code == 502
    error = error_of(response)
    assert error["type"] == "upstream_error" and error["code"] == "upstream_unreachable"


@pytest.mark.parametrize("exc", [httpx.ConnectError("refused"), httpx.RemoteProtocolError("bad")])
async def test_upstream_transport_failure_is_502(upstream, exc):
    chat_route(upstream, side_effect=exc)
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)
    assert response.status_code == 502
    assert error_of(response)["code"] == "upstream_unreachable"


@pytest.mark.parametrize("exc", [httpx.ConnectTimeout("slow"), httpx.ReadTimeout("slow"), httpx.PoolTimeout("busy")])
async def test_upstream_timeout_is_504(upstream, exc):
    chat_route(upstream, side_effect=exc)
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)
    assert response.status_code == 504
    assert error_of(response)["code"] == "upstream_timeout"


async def test_json_answer_body_timing_out_is_504(upstream):
    stream = ScriptedStream([b'{"id":"chatcmpl-1","choices":', httpx.ReadTimeout("body stalled")])
    chat_route(upstream, side_effect=lambda request: httpx.Response(200, headers={"content-type": "application/json"}, stream=stream))
    async with running_proxy(raise_app_exceptions=False) as proxy:
        response = await proxy.client.post(PATH, json={"messages": []}, headers=AUTH)
    assert response.status_code == 504
    assert error_of(response)["code"] == "upstream_timeout"


async def test_client_leaving_before_the_upstream_answers_cancels_the_upstream_request(upstream):
    cancelled = anyio.Event()

    async def never_answers(request):
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    chat_route(upstream, side_effect=never_answers)
    async with started(build_app(make_settings())) as app:
        asgi = AsgiCall()
        asgi.disconnect.set()  # gone right after sending the body
        async with anyio.create_task_group() as group:
            group.start_soon(call_asgi, app, asgi, "POST", PATH, [(b"authorization", b"Bearer k")], [b'{"messages": []}'])
            with anyio.move_on_after(HANG_GUARD):  # the upstream never answers: only the proxy can end it
                await cancelled.wait()
            cancelled_by_the_proxy = cancelled.is_set()
            group.cancel_scope.cancel()
    assert cancelled_by_the_proxy


# --- repair header and log line -----------------------------------------------------------------------


async def test_repair_header_lists_codes_with_counts_in_first_seen_order(upstream):
    route = chat_route(upstream)
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1"), call("call_2")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "x"},
        {"role": "tool", "tool_call_id": "call_9", "content": "y"},
        {"role": "tool", "tool_call_id": "call_8", "content": "w"},
        {"role": "user", "content": "z"},
    ]
    async with running_proxy() as proxy:
        response = await proxy.client.post(PATH, json={"messages": messages}, headers=AUTH)
    # The orphan rule runs before the unanswered-call rule: two orphans, then one placeholder.
    assert response.headers["x-toolmend-repairs"] == "TM101=2,TM104=1"
    sent = orjson.loads(route.calls.last.request.content)["messages"]
    assert {"role": "tool", "tool_call_id": "call_2", "content": DEFAULT_PLACEHOLDER} in sent


async def test_one_log_line_per_request_without_content_or_credentials(upstream, caplog):
    chat_route(upstream)
    caplog.set_level(logging.DEBUG)
    secret_text = "MY-PRIVATE-QUESTION-about-paris"
    secret_result = "TOOL-RESULT-18C-confidential"
    history = [{"role": "user", "content": secret_text}, {"role": "tool", "tool_call_id": "call_o1", "content": secret_result}]
    async with running_proxy() as proxy:
        caplog.clear()
        clean = await proxy.client.post(PATH, json={"messages": [{"role": "user", "content": secret_text}]}, headers=AUTH)
        assert clean.status_code == 200
        [clean_line] = [r for r in caplog.records if r.name == "toolmend.access"]
        assert "repairs" not in clean_line.request
        caplog.clear()
        response = await proxy.client.post(PATH, json={"messages": history}, headers={**AUTH, "x-request-id": "req-4711"})
    assert response.headers["x-toolmend-repairs"] == "TM101=1"
    [record] = [r for r in caplog.records if r.name == "toolmend.access"]
    line = TextFormatter().format(record)
    assert "request_id=req-4711" in line and "repairs=TM101=1" in line and f"tenant={tenant_for()[:8]}" in line
    assert tenant_for() not in line  # a prefix only
    everything = caplog.text + "\n".join(TextFormatter().format(r) for r in caplog.records)
    for secret in (CLIENT_KEY, secret_text, secret_result):
        assert secret not in everything


async def test_log_line_has_a_request_id_even_when_the_client_sends_none(upstream, caplog):
    chat_route(upstream)
    caplog.set_level(logging.INFO, logger="toolmend")
    async with running_proxy() as proxy:
        caplog.clear()  # the lifespan's start-up lines
        response = await proxy.client.post(PATH, json={"messages": orphan_history("call_z")}, headers=AUTH)
    [record] = [r for r in caplog.records if r.name == "toolmend.access"]
    request_id = record.request["request_id"]
    assert len(request_id) == 32 and int(request_id, 16) >= 0
    assert response.headers["x-toolmend-request-id"] == request_id

# --- a plan that only looks in memory (Messages: thinking the client may have altered, AM-13) ---------------------

SIGNED = {"type": "thinking", "thinking": "Two lookups:\n\n  weather, then time.  \n", "signature": "EqQBCkgIARABGAIiQLsig3"}
CALLED = {"type": "tool_use", "id": "toolu_07", "name": "clock", "input": {"tz": "Asia/Tokyo"}}


def _signed_loop(thinking: dict) -> dict:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": [
        {"role": "user", "content": "What time is it in Tokyo?"},
        {"role": "assistant", "content": [thinking, CALLED]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_07", "content": "09:00"}]},
    ]}


async def test_a_look_in_memory_that_recalls_nothing_runs_no_repair(upstream, monkeypatch):
    """The latest message's signed thinking is looked up in memory on every such request (AM-13, proactively); when
    memory holds none of its turns there is nothing to compare, the repair is not asked for, and the client's bytes
    go upstream. When memory holds the turn, the thinking the client altered is put back as remembered."""
    from proxy.dialects.messages.plan import MessagesPlan

    route = upstream.post("/messages").mock(return_value=httpx.Response(200, json={"type": "message", "content": []}))
    repair, asked = MessagesPlan.repair, []

    def counted(plan, *args, **kwargs):
        asked.append(plan.recall)
        return repair(plan, *args, **kwargs)

    monkeypatch.setattr(MessagesPlan, "repair", counted)
    headers = {**AUTH, "anthropic-version": "2023-06-01"}
    altered = _signed_loop({**SIGNED, "thinking": "Two lookups: weather, then time."})
    store = InProcessStore(ttl_seconds=60, max_entries=10)
    async with running_proxy(store=store) as proxy:
        sent = orjson.dumps(altered)
        response = await proxy.client.post("/v1/messages", content=sent, headers={**headers, "content-type": "application/json"})
        assert response.status_code == 200 and "x-toolmend-repairs" not in response.headers
        assert route.calls.last.request.content == sent and asked == []
        turn = {"dialect": "messages", "ids": ["toolu_07"], "message_id": "msg_07", "blocks": [SIGNED, CALLED]}
        await store.remember(f"{tenant_for()}/messages", [turn])
        response = await proxy.client.post("/v1/messages", content=sent, headers={**headers, "content-type": "application/json"})
    assert response.headers["x-toolmend-repairs"] == "TM516=1" and asked == [["toolu_07"]]
    assert orjson.loads(route.calls.last.request.content)["messages"][1]["content"] == [SIGNED, CALLED]
