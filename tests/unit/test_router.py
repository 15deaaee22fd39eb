"""Security of routing: admission and the tenant follow the route actually used, credentials reach an upstream
only where they belong, and the upstream URL keeps its configured scheme, host, port and base path.

toolmend issue 10, items 1, 2 and 13.
"""

import asyncio
import socket
from pathlib import Path

import anyio
import httpx
import orjson
import pytest
import respx

from proxy.app import create_app
from proxy.config import load
from proxy.forward import Upstream
from proxy.router import InvalidPath, Router, UpstreamRoute, gemini_target, upstream_path
from tests.support.client_tls import TLS
from tests.support.processes import HANG_GUARD
from tests.support.proxy_fixtures import (
    AsgiCall,
    call,
    call_asgi,
    completion,
    error_of,
    make_settings,
    orphan_history,
    running_proxy,
    started,
)
from tests.support.raw_server import RawServer, ok, respond
from tests.support.strict_upstream import serve

TEAM_KEY = "team-key-1"
OPERATOR_KEY = "sk-operator-deepseek"
ANSWER = {"id": "c", "object": "chat.completion", "choices": []}
HELLO = [{"role": "user", "content": "hi"}]


def routes_settings(tmp_path: Path, text: str, **environ: str):
    path = tmp_path / "routes.toml"
    path.write_text(text)
    return load({"upstream": "http://default.test/v1", "config": str(path), "memory": "memory://"},
                {"TOOLMEND_API_KEYS": TEAM_KEY, **environ})


def credentials_seen(request: httpx.Request) -> str:
    """Everything an upstream could read a key from: every header value and the whole URL."""
    return " ".join([str(request.url), *(value for _, value in request.headers.multi_items())])


# --- item 1: admission is decided for the route that will be used -------------------------------------------

KEYED_MODEL_ROUTE = """
[[route]]
model = "deepseek-*"
upstream = "http://deepseek.test/v1"
api_key_env = "DEEPSEEK_KEY"
"""


async def test_a_model_route_with_its_own_key_requires_a_client_key(tmp_path: Path) -> None:
    settings = routes_settings(tmp_path, KEYED_MODEL_ROUTE, DEEPSEEK_KEY=OPERATOR_KEY)
    with respx.mock(assert_all_called=False) as mock:
        deepseek = mock.post("http://deepseek.test/v1/chat/completions").respond(json=ANSWER)
        default = mock.post("http://default.test/v1/chat/completions").respond(json=ANSWER)
        async with running_proxy(settings) as proxy:
            anonymous = await proxy.client.post("/v1/chat/completions", json={"model": "deepseek-chat", "messages": HELLO})
            wrong = await proxy.client.post("/v1/chat/completions", json={"model": "deepseek-chat", "messages": HELLO},
                                            headers={"authorization": "Bearer sk-someone-elses"})
            assert deepseek.call_count == 0
            member = await proxy.client.post("/v1/chat/completions", json={"model": "deepseek-chat", "messages": HELLO},
                                             headers={"authorization": f"Bearer {TEAM_KEY}"})
            # The default route sends no key of its own: its clients bring theirs, no toolmend key needed.
            own_key = await proxy.client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": HELLO},
                                              headers={"authorization": "Bearer sk-own-openai"})
    assert (anonymous.status_code, error_of(anonymous)["code"]) == (401, "invalid_api_key")
    assert (wrong.status_code, error_of(wrong)["code"]) == (401, "invalid_api_key")
    assert member.status_code == 200
    assert deepseek.call_count == 1
    assert deepseek.calls.last.request.headers.get_list("authorization") == [f"Bearer {OPERATOR_KEY}"]
    assert own_key.status_code == 200
    assert default.calls.last.request.headers["authorization"] == "Bearer sk-own-openai"


async def test_no_body_is_read_when_no_reachable_route_would_admit_the_client(tmp_path: Path) -> None:
    settings = routes_settings(tmp_path, KEYED_MODEL_ROUTE, DEEPSEEK_KEY=OPERATOR_KEY, TOOLMEND_UPSTREAM_API_KEY="sk-operator-default")
    never = anyio.Event()  # the body never arrives: a handler that waited for it would hang
    asgi = AsgiCall()
    with respx.mock(assert_all_called=False) as mock:
        upstream = mock.route().respond(json=ANSWER)
        async with started(create_app(settings, transport=httpx.AsyncHTTPTransport(verify=TLS))) as app:
            with anyio.fail_after(HANG_GUARD):
                await call_asgi(app, asgi, "POST", "/v1/chat/completions", [(b"content-length", b"10")], [never, b"{}"])
    assert asgi.status == 401
    assert not upstream.called


KEYLESS_MODEL_ROUTE = """
[[route]]
model = "llama-*"
upstream = "http://llama.test/v1"
"""


async def test_a_toolmend_key_never_reaches_a_route_without_a_key_of_its_own(tmp_path: Path) -> None:
    settings = routes_settings(tmp_path, KEYLESS_MODEL_ROUTE, TOOLMEND_UPSTREAM_API_KEY="sk-operator-default")
    with respx.mock(assert_all_called=False) as mock:
        llama = mock.post(url__startswith="http://llama.test/v1/chat/completions").respond(json=ANSWER)
        async with running_proxy(settings) as proxy:
            member = await proxy.client.post(
                f"/v1/chat/completions?alt=sse&key={TEAM_KEY}&k%65y=team%2Dkey%2D1", json={"model": "llama-3", "messages": HELLO},
                headers={"authorization": f"Bearer {TEAM_KEY}", "api-key": TEAM_KEY, "x-api-key": TEAM_KEY,
                         "x-goog-api-key": TEAM_KEY})
            bring_own = await proxy.client.post("/v1/chat/completions", json={"model": "llama-3", "messages": HELLO},
                                                headers={"authorization": "Bearer sk-own-llama"})
    assert member.status_code == bring_own.status_code == 200
    sent_for_member, sent_for_own = (call_.request for call_ in llama.calls)
    assert TEAM_KEY not in credentials_seen(sent_for_member)
    assert sent_for_member.url.raw_path == b"/v1/chat/completions?alt=sse"
    # A route without a key of its own still forwards a client's own upstream key, as without toolmend.
    assert sent_for_own.headers["authorization"] == "Bearer sk-own-llama"


GATEWAY_TOKENS = {"ocp-apim-subscription-key": "gw-apim", "cf-aig-authorization": "Bearer gw-cloudflare",
                  "x-portkey-api-key": "gw-portkey"}


async def test_a_route_with_the_operators_key_forwards_no_client_provider_credential() -> None:
    settings = make_settings(upstream_api_key="sk-operator-default", api_keys=frozenset({TEAM_KEY}))
    with respx.mock(assert_all_called=False) as mock:
        models = mock.get(url__startswith="http://upstream.test/v1/models").respond(json={"data": []})
        async with running_proxy(settings) as proxy:
            response = await proxy.client.get(
                "/v1/models?key=sk-client-gemini&alt=json&k%65y=sk-client-encoded&limit=2",
                headers={"authorization": f"Bearer {TEAM_KEY}", "api-key": "sk-client-azure", "x-api-key": "sk-client-anthropic",
                         "x-goog-api-key": "sk-client-gemini", **GATEWAY_TOKENS})
    assert response.status_code == 200
    sent = models.calls.last.request
    assert "sk-client" not in credentials_seen(sent) and TEAM_KEY not in credentials_seen(sent)
    assert sent.headers.get_list("authorization") == ["Bearer sk-operator-default"]
    assert sent.url.raw_path == b"/v1/models?alt=json&limit=2"
    # A gateway's token is the client's own credential for its gateway, not the provider's key: it goes as sent.
    assert {name: sent.headers[name] for name in GATEWAY_TOKENS} == GATEWAY_TOKENS


@pytest.mark.parametrize("carrier", ["authorization", "x-api-key", "api-key"])
def test_an_operator_key_route_replaces_the_provider_key_and_keeps_the_gateway_tokens(carrier: str) -> None:
    upstream = Upstream("https://gateway.ai.cloudflare.com/v1/acct/gw/openai", httpx.AsyncHTTPTransport(verify=TLS), 1.0,
                        api_key="sk-operator", client_keys=[TEAM_KEY])
    own = f"Bearer {TEAM_KEY}" if carrier == "authorization" else TEAM_KEY
    gateway = [(name.encode(), value.encode()) for name, value in GATEWAY_TOKENS.items()]
    sent = upstream.request_headers([(carrier.encode(), own.encode()), *gateway, (b"accept", b"*/*")])
    operator = b"Bearer sk-operator" if carrier == "authorization" else b"sk-operator"
    assert sent == [*gateway, (b"accept", b"*/*"), (carrier.encode(), operator)]


def test_a_gateway_token_never_chooses_the_carrier_of_the_operators_key() -> None:
    upstream = Upstream("https://apim.example/openai", httpx.AsyncHTTPTransport(verify=TLS), 1.0, api_key="sk-operator", client_keys=[TEAM_KEY])
    sent = upstream.request_headers([(b"ocp-apim-subscription-key", b"gw-apim")])
    assert sent == [(b"ocp-apim-subscription-key", b"gw-apim"), (b"authorization", b"Bearer sk-operator")]


@pytest.mark.parametrize("api_key", [None, "sk-operator"])
def test_a_toolmend_key_in_a_gateway_carrier_stays_behind(api_key: str | None) -> None:
    upstream = Upstream("https://gateway.example/v1", httpx.AsyncHTTPTransport(verify=TLS), 1.0, api_key=api_key, client_keys=[TEAM_KEY])
    sent = upstream.request_headers([(b"x-portkey-api-key", TEAM_KEY.encode()), (b"cf-aig-authorization", b"Bearer gw-cloudflare")])
    assert (b"x-portkey-api-key", TEAM_KEY.encode()) not in sent
    assert (b"cf-aig-authorization", b"Bearer gw-cloudflare") in sent


@pytest.mark.parametrize(("carrier", "expected"), [("x-api-key", "sk-operator-default"), ("authorization", "Bearer sk-operator-default")])
async def test_the_operators_key_goes_in_the_carrier_the_client_used(carrier: str, expected: str) -> None:
    # An Anthropic SDK presents x-api-key and Anthropic expects the key there: the operator's key follows it.
    settings = make_settings(upstream_api_key="sk-operator-default", api_keys=frozenset({TEAM_KEY}))
    value = f"Bearer {TEAM_KEY}" if carrier == "authorization" else TEAM_KEY
    with respx.mock(assert_all_called=False) as mock:
        models = mock.get(url__startswith="http://upstream.test/v1/models").respond(json={"data": []})
        async with running_proxy(settings) as proxy:
            response = await proxy.client.get("/v1/models", headers={carrier: value})
    assert response.status_code == 200
    sent = models.calls.last.request.headers
    assert sent.get_list(carrier) == [expected]
    assert TEAM_KEY not in credentials_seen(models.calls.last.request)
    assert [name for name in ("authorization", "api-key", "x-api-key", "x-goog-api-key") if name in sent] == [carrier]


# --- item 13: every credential carrier scopes the tenant; --require-client-key ------------------------------


@pytest.mark.parametrize("carrier", ["x-goog-api-key", "query"])
async def test_gemini_style_credentials_each_get_their_own_memory(carrier: str) -> None:
    def send(client: httpx.AsyncClient, key: str, messages: list) -> object:
        if carrier == "query":
            return client.post(f"/v1/chat/completions?key={key}", json={"messages": messages})
        return client.post("/v1/chat/completions", json={"messages": messages}, headers={carrier: key})

    with respx.mock(assert_all_called=False) as mock:
        chat = mock.post(url__startswith="http://upstream.test/v1/chat/completions")
        chat.side_effect = [httpx.Response(200, json=completion([call("call_g1", name="private_tool")])),
                            httpx.Response(200, json=ANSWER), httpx.Response(200, json=ANSWER)]
        async with running_proxy() as proxy:
            await send(proxy.client, "sk-gemini-one", HELLO)
            other = await send(proxy.client, "sk-gemini-two", orphan_history("call_g1"))
            same = await send(proxy.client, "sk-gemini-one", orphan_history("call_g1"))
    assert other.headers["x-toolmend-repairs"] == same.headers["x-toolmend-repairs"] == "TM101=1"
    to_other, to_same = (orjson.loads(c.request.content)["messages"][1] for c in chat.calls[1:])
    assert to_other["tool_calls"][0]["function"]["name"] == "unknown_tool"  # synthesized: nothing recalled
    assert to_same["tool_calls"][0]["function"]["name"] == "private_tool"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models"])
async def test_require_client_key_refuses_requests_without_any_credential(path: str) -> None:
    with respx.mock(assert_all_called=False) as mock:
        upstream = mock.route().respond(json=ANSWER)
        async with running_proxy(make_settings(require_client_key=True)) as proxy:
            refused = await proxy.client.post(path, json={"messages": HELLO}, headers={"x-api-key": ""})
            assert not upstream.called
            admitted = [await proxy.client.post(path + query, json={"messages": HELLO}, headers=headers)
                        for query, headers in [("", {"authorization": "Bearer sk-a"}), ("", {"api-key": "k"}),
                                               ("", {"x-api-key": "k"}), ("", {"x-goog-api-key": "k"}), ("?key=k", {})]]
    assert refused.status_code == 401 and error_of(refused)["code"] == "missing_api_key"
    assert [response.status_code for response in admitted] == [200] * 5


async def test_require_client_key_counts_the_toolmend_key_in_upstream_key_mode() -> None:
    settings = make_settings(require_client_key=True, upstream_api_key="sk-operator-default", api_keys=frozenset({TEAM_KEY}))
    with respx.mock(assert_all_called=False) as mock:
        mock.route().respond(json=ANSWER)
        async with running_proxy(settings) as proxy:
            member = await proxy.client.post("/v1/chat/completions", json={"messages": HELLO},
                                             headers={"authorization": f"Bearer {TEAM_KEY}"})
            anonymous = await proxy.client.post("/v1/chat/completions", json={"messages": HELLO})
    assert member.status_code == 200
    assert (anonymous.status_code, error_of(anonymous)["code"]) == (401, "missing_api_key")


# --- item 2: the upstream URL is built from parts -----------------------------------------------------------

SHAPES = [  # (upstream as configured, its base path on the wire)
    ("http://127.0.0.1:{port}", b""),
    ("http://127.0.0.1:{port}/", b""),
    ("http://127.0.0.1:{port}/v1", b"/v1"),
    ("http://127.0.0.1:{port}/api/v1/", b"/api/v1"),
    ("http://[::1]:{port}/v1", b"/v1"),
]
# (target as the client sends it, what the upstream is asked for below its base path, or the status of the
# refusal: 400 invalid_path from toolmend, 404 when the decoded path matches no route at all).
# {a} is the port of a second loopback server standing in for an attacker's host.
TARGETS = [
    (b"/v1%2F@127.0.0.1:{a}/x", 400),
    (b"/v1%2f@127.0.0.1:{a}/x", 400),
    (b"/v1%5C@127.0.0.1:{a}/x", 404),
    (b"/v1/../../../etc/passwd", 400),
    (b"/v1/./models", 400),
    (b"/v1/models/.", 400),
    (b"/v1/%2e%2e/%2e%2e/etc", 400),
    (b"/v1/.%2E/x", 400),
    (b"/v1/x/..%2F..%2F..%2Fetc", 400),
    (b"/v1/x%5C..%5C..%5Cetc", 400),
    (b"/v1/%252e%252e/x", 400),
    (b"/v1//127.0.0.1:{a}/x", 400),
    (b"/v1/models/%2F%2F127.0.0.1:{a}", 400),
    (b"/v1/x%00y", 400),
    (b"/v1/%zz", 400),
    (b"/v1/chat/completions", b"/chat/completions"),
    (b"/v1/models/", b"/models/"),
    (b"/v1/@127.0.0.1:{a}/x", b"/@127.0.0.1:{a}/x"),
    (b"/v1/models%40127.0.0.1:{a}", b"/models%40127.0.0.1:{a}"),
    (b"/v1/models/meta-llama%2FLlama-3-8B", b"/models/meta-llama%2FLlama-3-8B"),
    (b"/v1/models/a%3Fb%23c%5Cd", b"/models/a%3Fb%23c%5Cd"),
    (b"/v1/files/f:1;v=2,3!$&'()*+~", b"/files/f:1;v=2,3!$&'()*+~"),
    (b"/v1/models?after=m%2F1&limit=2", b"/models?after=m%2F1&limit=2"),
]


def loopback_available(host: str) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family) as probe:
            probe.bind((host, 0))
    except OSError:
        return False
    return True


async def get_raw(base: str, target: bytes) -> tuple[int, bytes]:
    """One GET with ``target`` exactly as given on the request line (an HTTP client would normalize it)."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GET %b HTTP/1.1\r\nHost: proxy.test\r\nAuthorization: Bearer %b\r\nConnection: close\r\n\r\n"
                 % (target, TEAM_KEY.encode()))
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.parametrize(("shape", "base_path"), SHAPES, ids=[shape for shape, _ in SHAPES])
async def test_forwarded_requests_reach_the_configured_host_port_and_base_path(shape: str, base_path: bytes) -> None:
    host = "::1" if "[::1]" in shape else "127.0.0.1"
    if not loopback_available(host):
        pytest.skip(f"{host} is not available here")
    async with asyncio.timeout(60), RawServer(respond(lambda r: ok()), host) as upstream, \
            RawServer(respond(lambda r: ok(b"attacker"))) as attacker:
        configured = shape.format(port=upstream.port)
        settings = make_settings(upstream=configured, upstream_api_key=OPERATOR_KEY, api_keys=frozenset({TEAM_KEY}))
        with serve(create_app(settings)) as proxy:
            for template, expected in TARGETS:
                target = template.replace(b"{a}", str(attacker.port).encode())
                arrived = len(upstream.requests)
                status, body = await get_raw(proxy, target)
                sent = [request.target for request in upstream.requests[arrived:]]
                assert attacker.accepts == 0, f"{target!r} reached the attacker's host"
                if isinstance(expected, int):
                    assert (status, sent) == (expected, []), target
                    assert orjson.loads(body)["error"]["code"] == {400: "invalid_path", 404: "not_found"}[expected], target
                else:
                    wanted = base_path + expected.replace(b"{a}", str(attacker.port).encode())
                    assert (status, sent) == (200, [wanted]), target
        assert {request.header(b"host") for request in upstream.requests} == {configured.split("/")[2].encode()}
        assert {request.header(b"authorization") for request in upstream.requests} == {f"Bearer {OPERATOR_KEY}".encode()}


@pytest.mark.parametrize(("configured", "path", "expected"), [
    ("https://api.deepseek.com", b"/chat/completions", "https://api.deepseek.com/chat/completions"),
    ("https://api.deepseek.com/", b"/chat/completions", "https://api.deepseek.com/chat/completions"),
    ("https://api.deepseek.com:443/v1", b"/models", "https://api.deepseek.com/v1/models"),
    ("http://127.0.0.1:8080/api/v1/", b"/models/", "http://127.0.0.1:8080/api/v1/models/"),
    ("http://[::1]:9/v1", b"/@evil.example:1/x", "http://[::1]:9/v1/@evil.example:1/x"),
    ("https://api.deepseek.com", b"/a%2F@evil.example", "https://api.deepseek.com/a%2F@evil.example"),
])
def test_upstream_url_keeps_scheme_host_port_and_base_path(configured: str, path: bytes, expected: str) -> None:
    upstream = Upstream(configured, httpx.AsyncHTTPTransport(verify=TLS), 1.0)
    url = upstream.url(path, b"")
    parsed = httpx.URL(configured)
    assert str(url) == expected
    assert (url.scheme, url.host, url.port) == (parsed.scheme, parsed.host, parsed.port)
    assert upstream.url(path, b"") is url  # built once, then served from the cache


@pytest.mark.parametrize(("path", "query"), [
    (b"/../x", b""), (b"/%2e%2e/x", b""), (b"/a/%2E", b""), (b"/a\\b", b""), (b"/a b", b""), (b"/a#b", b""),
    (b"//x", b""), (b"/a%5C%2E%2E%5Cb", b""), (b"/\xc3\xa9", b""), (b"/a%0d%0aX:1", b""), (b"/x", b"a#b"), (b"/x", b"a=\xff"),
])
def test_router_refuses_targets_that_could_leave_the_base_path(path: bytes, query: bytes) -> None:
    router = Router(default=None)  # type: ignore[arg-type]  # only the target check runs
    with pytest.raises(InvalidPath):
        router.select(b"/v1" + path, query)


def test_accepted_paths_are_returned_as_sent() -> None:
    for path in (b"/", b"/chat/completions", b"/models/a%2Fb", b"/files/x/", b"/a@b:c", b"/a%25b", b"/.well-known/x", b"/a..b/c.d"):
        assert upstream_path(path) == path


# --- Google's targets keep their version on the way upstream (a Gemini route's upstream is the host alone); every
# other target goes below /v1 as before, an OpenAI model id with colons included. Both get the same path checks.

DEFAULT = object()


def select(target: bytes) -> bytes:
    router = Router(default=DEFAULT)  # type: ignore[arg-type]  # only the target runs
    route, path = router.select(target, b"")
    assert route is DEFAULT
    return path


@pytest.mark.parametrize("target", [
    b"/v1beta/models/gemini-2.5-flash:streamGenerateContent", b"/v1beta/models", b"/v1beta/cachedContents/c1",
    b"/v1alpha/models/gemini-3-pro:generateContent", b"/v1/models/gemini-2.5-pro:generateContent",
    b"/v1/models/gemini-2.5-pro:countTokens", b"/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent",
    b"/v1beta1/publishers/google/models/gemini-2.5-flash:generateContent",
])
def test_googles_targets_go_upstream_with_their_version(target: bytes) -> None:
    assert gemini_target(target)
    assert select(target) == target


@pytest.mark.parametrize("target", [
    b"/v1/chat/completions", b"/v1/models", b"/v1/models/ft:gpt-4o-mini:org:abc123", b"/v1/models/gpt-4o",
    b"/v1/messages", b"/v1/organization/projects", b"/v1/responses/resp_1",
])
def test_every_other_target_goes_below_v1(target: bytes) -> None:
    assert not gemini_target(target)
    assert select(target) == target[len(b"/v1"):]


@pytest.mark.parametrize("target", [b"/v1beta/../v1/x", b"/v1beta/models/%2e%2e%2fother:generateContent", b"/v1beta//x",
                                    b"/v2/models", b"/v1betax/models"])
def test_a_google_target_cannot_leave_the_base_path_either(target: bytes) -> None:
    with pytest.raises(InvalidPath):
        select(target)


def test_a_route_prefix_serves_googles_targets_too() -> None:
    prefixed = UpstreamRoute(upstream=None, profile=None, prefix="/google")  # type: ignore[arg-type]
    router = Router(default=DEFAULT, routes=(prefixed,))  # type: ignore[arg-type]
    assert router.select(b"/google/v1beta/models/g:generateContent", b"") == (prefixed, b"/v1beta/models/g:generateContent")
    assert router.select(b"/google/v1/chat/completions", b"") == (prefixed, b"/chat/completions")
    with pytest.raises(InvalidPath):  # /google must not catch /googlex/v1/...
        router.select(b"/googlex/v1/chat/completions", b"")
