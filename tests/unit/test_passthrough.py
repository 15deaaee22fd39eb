"""Everything under ``/v1/`` except chat completions goes through unchanged; plus health and routing errors."""

import anyio
import httpx
import pytest

from proxy.app import create_app
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import (
    AUTH,
    CLIENT_KEY,
    AsgiCall,
    ScriptedStream,
    build_app,
    call_asgi,
    error_of,
    make_settings,
    running_proxy,
    started,
)


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_any_method_is_forwarded_with_path_query_and_body(upstream, method):
    route = upstream.route().mock(return_value=httpx.Response(
        201, content=b'{"object": "list" ,"data":[]}', headers={"content-type": "application/json", "x-upstream": "yes"}))
    body = b'{"purpose":  "batch"}' if method in ("POST", "PUT", "PATCH") else b""
    async with running_proxy() as proxy:
        response = await proxy.client.request(method, "/v1/files/file-abc/content?limit=2&after=x", content=body or None,
                                              headers={**AUTH, "x-custom": "kept"})
    sent = route.calls.last.request
    assert sent.method == method
    assert sent.url.raw_path == b"/v1/files/file-abc/content?limit=2&after=x"
    assert sent.content == body
    assert sent.headers["authorization"] == f"Bearer {CLIENT_KEY}"
    assert sent.headers["x-custom"] == "kept"
    assert sent.headers["host"] == "upstream.test"
    assert (response.status_code, response.content, response.headers["x-upstream"]) == (201, b'{"object": "list" ,"data":[]}', "yes")


async def test_head_is_forwarded_and_answered_without_a_body(upstream):
    route = upstream.head("/models").mock(return_value=httpx.Response(200, headers={"content-length": "123", "x-h": "1"}))
    async with running_proxy() as proxy:
        response = await proxy.client.head("/v1/models", headers=AUTH)
    assert route.called
    assert (response.status_code, response.content, response.headers["x-h"]) == (200, b"", "1")


async def test_get_on_chat_completions_is_a_plain_pass_through(upstream):
    # Listing stored completions: GET on the chat path must not be parsed or repaired.
    route = upstream.get("/chat/completions").mock(return_value=httpx.Response(200, json={"data": []}))
    async with running_proxy() as proxy:
        response = await proxy.client.get("/v1/chat/completions?metadata[k]=v", headers=AUTH)
    assert response.json() == {"data": []}
    assert route.calls.last.request.url.raw_path == b"/v1/chat/completions?metadata[k]=v"


# docs/protocols.md, "What it repairs, and what passes through": every other API passes through untouched. Each body holds
# a result whose call is gone (what TM101 repairs in a chat completion), in the API's own format; it must reach
# the upstream as the client's bytes, and the streamed answer must come back unchanged.
UNREPAIRED_APIS = {
    "/threads/runs": b'{"assistant_id": "asst_1", "thread": {"messages": [{"role": "tool", "tool_call_id": "call_1",'
                     b' "content": "18C"}]}, "stream": true}',
}


@pytest.mark.parametrize("path", UNREPAIRED_APIS)
async def test_apis_other_than_chat_completions_pass_through_unrepaired(upstream, path):
    answer = b'event: message\ndata: {"type": "delta", "text": "18C"}\n\ndata: [DONE]\n\n'
    route = upstream.post(path).mock(return_value=httpx.Response(200, content=answer,
                                                                 headers={"content-type": "text/event-stream"}))
    async with running_proxy() as proxy:
        response = await proxy.client.post("/v1" + path, content=UNREPAIRED_APIS[path],
                                           headers={**AUTH, "content-type": "application/json"})
    assert route.calls.last.request.content == UNREPAIRED_APIS[path]
    assert (response.status_code, response.content) == (200, answer)
    assert "x-toolmend-repairs" not in response.headers

async def test_request_headers_keep_accept_encoding_and_drop_hop_by_hop(upstream):
    route = upstream.get("/models").mock(return_value=httpx.Response(200))
    headers = {**AUTH, "accept-encoding": "br", "connection": "keep-alive", "keep-alive": "timeout=1", "te": "trailers",
               "upgrade": "h2c", "proxy-authorization": "Basic eA=="}
    async with running_proxy() as proxy:
        await proxy.client.get("/v1/models", headers=headers)
    sent = route.calls.last.request.headers
    assert sent["accept-encoding"] == "br"
    for name in ("connection", "keep-alive", "te", "upgrade", "proxy-authorization"):
        assert name not in sent, name


async def test_response_status_headers_and_bytes_unchanged_including_errors(upstream):
    raw = b'{"error": {"message": "No such file", "type": "invalid_request_error", "param": "id", "code": null}}'
    upstream.get("/files/missing").mock(return_value=httpx.Response(
        404, content=raw, headers=[("content-type", "application/json"), ("retry-after", "9"), ("x-dup", "1"), ("x-dup", "2"),
                                   ("connection", "close")]))
    async with running_proxy() as proxy:
        response = await proxy.client.get("/v1/files/missing", headers=AUTH)
    assert response.status_code == 404
    assert response.content == raw
    assert response.headers["retry-after"] == "9"
    assert response.headers.get_list("x-dup") == ["1", "2"]
    assert "connection" not in response.headers


async def test_request_body_is_streamed_not_buffered():
    first_part_upstream = anyio.Event()
    received: list[bytes] = []

    class StreamingUpstream(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            async for part in request.stream:
                received.append(part)
                first_part_upstream.set()
            return httpx.Response(200, stream=ScriptedStream([b"stored"]))

    app = create_app(make_settings(max_body_bytes=1024), transport=StreamingUpstream())
    asgi = AsgiCall()
    asgi.disconnect.set()
    parts = [b"a" * 1500, first_part_upstream, b"b" * 1500]  # the second part waits until the first is upstream
    async with started(app):
        with anyio.fail_after(HANG_GUARD):
            await call_asgi(app, asgi, "POST", "/v1/uploads/u1/parts", [(b"transfer-encoding", b"chunked")], parts)
    assert (asgi.status, b"".join(asgi.body_chunks)) == (200, b"stored")
    assert b"".join(received) == b"a" * 1500 + b"b" * 1500  # no size limit outside chat completions


async def test_pass_through_body_keeps_its_length(upstream):
    route = upstream.post("/files").mock(return_value=httpx.Response(200))
    async with running_proxy() as proxy:
        await proxy.client.post("/v1/files", content=b"x" * 100, headers=AUTH)
    assert route.calls.last.request.headers.get("content-length") == "100"


async def test_response_body_is_streamed_as_it_arrives(upstream):
    gate = anyio.Event()
    stream = ScriptedStream([b"part-1", gate, b"part-2"])
    upstream.get("/files/f/content").mock(side_effect=lambda request: httpx.Response(200, stream=stream))
    asgi = AsgiCall()

    async def on_send(message):
        if message.get("body") == b"part-1":
            gate.set()

    asgi.on_send = on_send
    async with started(build_app()) as app:
        with anyio.fail_after(HANG_GUARD):
            await call_asgi(app, asgi, "GET", "/v1/files/f/content", [], [b""])
    assert asgi.body_chunks == [b"part-1", b"part-2"]
    assert stream.closed.is_set()


async def test_client_disconnect_closes_the_upstream_download(upstream):
    stream = ScriptedStream([b"first"], hang=True)
    upstream.get("/files/f/content").mock(side_effect=lambda request: httpx.Response(200, stream=stream))
    asgi = AsgiCall()

    async def on_send(message):
        if message.get("body"):
            asgi.disconnect.set()

    asgi.on_send = on_send
    async with started(build_app()) as app:
        with anyio.fail_after(HANG_GUARD):
            await call_asgi(app, asgi, "GET", "/v1/files/f/content", [], [b""])
            await stream.closed.wait()


async def test_percent_encoded_path_is_forwarded_unchanged(upstream):
    route = upstream.route().mock(return_value=httpx.Response(200))
    async with running_proxy() as proxy:
        await proxy.client.get("/v1/models/meta-llama%2FLlama-3-8B", headers=AUTH)
    assert route.calls.last.request.url.raw_path == b"/v1/models/meta-llama%2FLlama-3-8B"


async def test_upstream_key_mode_guards_pass_through_too(upstream):
    route = upstream.get("/models").mock(return_value=httpx.Response(200))
    settings = make_settings(upstream_api_key="sk-proxy-upstream", api_keys=frozenset({"tm-1"}))
    async with running_proxy(settings) as proxy:
        denied = await proxy.client.get("/v1/models", headers=AUTH)
        allowed = await proxy.client.get("/v1/models", headers={"authorization": "Bearer tm-1"})
    assert denied.status_code == 401 and error_of(denied)["code"] == "invalid_api_key"
    assert allowed.status_code == 200
    assert route.call_count == 1
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-proxy-upstream"


@pytest.mark.parametrize(("exc", "status", "code"), [
    (httpx.ConnectError("refused"), 502, "upstream_unreachable"),
    (httpx.ReadTimeout("slow"), 504, "upstream_timeout"),
])
async def test_upstream_failures_are_openai_shaped(upstream, exc, status, code):
    upstream.get("/models").mock(side_effect=exc)
    async with running_proxy() as proxy:
        response = await proxy.client.get("/v1/models", headers=AUTH)
    assert response.status_code == status
    assert error_of(response)["code"] == code


@pytest.mark.parametrize("path", ["/messages/count_tokens", "/messages/batches/msgbatch_1"])
async def test_toolmend_s_pass_through_errors_under_messages_are_anthropic_shaped(upstream, path):
    upstream.post(path).mock(side_effect=httpx.ConnectError("refused"))
    settings = make_settings(upstream_api_key="sk-proxy-upstream", api_keys=frozenset({"tm-1"}))
    async with running_proxy(settings) as proxy:
        failed = await proxy.client.post("/v1" + path, json={}, headers={"x-api-key": "tm-1"})
        denied = await proxy.client.post("/v1" + path, json={}, headers={"x-api-key": "not-a-toolmend-key"})
        elsewhere = await proxy.client.get("/v1/models", headers={"x-api-key": "not-a-toolmend-key"})
        anthropic_models = await proxy.client.get("/v1/models", headers={"x-api-key": "nope", "anthropic-version": "2023-06-01"})
    assert failed.status_code == 502 and failed.json() == {"type": "error", "error": {"type": "api_error", "message": failed.json()["error"]["message"]}}
    assert denied.status_code == 401 and denied.json()["type"] == "error" and denied.json()["error"]["type"] == "authentication_error"
    assert elsewhere.status_code == 401 and error_of(elsewhere)["code"] == "invalid_api_key"  # OpenAI's shape outside /v1/messages
    assert anthropic_models.json()["error"]["type"] == "authentication_error"  # ... unless the client speaks Anthropic's API


async def test_health_and_readiness_need_no_key_and_never_go_upstream(upstream):
    route = upstream.route().mock(return_value=httpx.Response(200))
    settings = make_settings(upstream_api_key="sk-proxy-upstream", api_keys=frozenset({"tm-1"}))
    async with running_proxy(settings) as proxy:
        health = await proxy.client.get("/healthz")
        ready = await proxy.client.get("/readyz")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready", "memory": {"backend": "memory", "ready": True}})
    assert not route.called


async def test_readiness_reports_a_degraded_store_but_stays_in_rotation():
    class DownStore:
        backend = "memory"

        async def ready(self):
            return False

        async def close(self):
            pass

    async with running_proxy(store=DownStore()) as proxy:
        ready = await proxy.client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "degraded", "memory": {"backend": "memory", "ready": False}}


@pytest.mark.parametrize(("method", "path", "status", "code"), [
    ("GET", "/", 404, "not_found"),
    ("GET", "/v2/models", 404, "not_found"),
    ("POST", "/healthz", 405, "method_not_allowed"),
])
async def test_routing_errors_are_openai_shaped(upstream, method, path, status, code):
    route = upstream.route().mock(return_value=httpx.Response(200))
    async with running_proxy() as proxy:
        response = await proxy.client.request(method, path)
    assert response.status_code == status
    assert error_of(response)["code"] == code
    assert not route.called


async def test_headers_named_in_connection_are_dropped_whatever_their_case(upstream):
    route = upstream.get("/models").mock(return_value=httpx.Response(
        200, headers=[("Connection", "X-Upstream-Hop"), ("x-upstream-hop", "1"), ("x-kept", "1")]))
    async with running_proxy() as proxy:
        response = await proxy.client.get("/v1/models", headers={**AUTH, "Connection": "X-Foo, Keep-Alive", "x-foo": "secret",
                                                                 "x-bar": "kept"})
    sent = route.calls.last.request.headers
    assert "x-foo" not in sent and sent["x-bar"] == "kept"
    assert "x-upstream-hop" not in response.headers and response.headers["x-kept"] == "1"


async def test_proxy_authenticate_from_the_upstream_is_not_relayed(upstream):
    # It challenges for credentials to a proxy between toolmend and the upstream: meaningless to the client.
    upstream.get("/models").mock(return_value=httpx.Response(
        407, headers={"proxy-authenticate": 'Basic realm="corp"', "x-kept": "1"}))
    async with running_proxy() as proxy:
        response = await proxy.client.get("/v1/models", headers=AUTH)
    assert response.status_code == 407
    assert "proxy-authenticate" not in response.headers and response.headers["x-kept"] == "1"
