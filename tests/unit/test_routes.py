"""Routes: a path prefix or a model pattern picks the upstream, its profile and its key."""

from pathlib import Path

import pytest
import respx

from proxy.config import ConfigError, load
from proxy.routes import load_routes
from tests.support.proxy_fixtures import AUTH, make_settings, running_proxy

ROUTES = """
[[route]]
prefix = "/mistral"
upstream = "http://mistral.test/v1"
api_key_env = "TEST_MISTRAL_KEY"

[[route]]
model = "deepseek-*"
upstream = "http://deepseek.test/v1"
profile = "deepseek"
"""
ORPHAN = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_AbCdEfGhIjKlMnOpQrStUvWx", "content": "r"}]
ANSWER = {"id": "c", "object": "chat.completion", "choices": []}


@pytest.mark.parametrize(("path", "body"), [
    ("/responses", {"model": "deepseek-chat", "input": [{"type": "function_call_output", "call_id": "call_x", "output": "r"}]}),
    ("/messages", {"model": "deepseek-chat", "max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]}]}),
])
async def test_every_repaired_endpoint_routes_by_prefix_and_model_the_same_way(tmp_path: Path, path: str, body: dict) -> None:
    settings = settings_with_routes(tmp_path)
    with respx.mock(assert_all_called=False) as mock:
        by_model = mock.post("http://deepseek.test/v1" + path).respond(json={})
        by_prefix = mock.post("http://mistral.test/v1" + path).respond(json={})
        async with running_proxy(settings) as proxy:
            routed = await proxy.client.post("/v1" + path, json=body, headers=AUTH)
            prefixed = await proxy.client.post("/mistral/v1" + path, json=body, headers={"authorization": "Bearer client-key"})
            refused = await proxy.client.post("/mistral/v1" + path, json=body, headers=AUTH)
    assert routed.status_code == prefixed.status_code == 200 and by_model.called and by_prefix.called
    assert "TM101=1" in routed.headers["x-toolmend-repairs"]  # repaired on the route its model selected
    assert refused.status_code == 401  # the keyed prefix route admits only toolmend's client keys


def routes_file(tmp_path: Path, text: str = ROUTES) -> str:
    path = tmp_path / "routes.toml"
    path.write_text(text)
    return str(path)


def settings_with_routes(tmp_path: Path):
    env = {"TEST_MISTRAL_KEY": "sk-mistral-upstream", "TOOLMEND_API_KEYS": "client-key"}
    return load({"upstream": "http://default.test/v1", "config": routes_file(tmp_path), "memory": "memory://"}, env)


async def test_prefix_model_and_default_routes(tmp_path: Path) -> None:
    settings = settings_with_routes(tmp_path)
    with respx.mock(assert_all_called=False) as mock:
        mistral = mock.post("http://mistral.test/v1/chat/completions").respond(json=ANSWER)
        deepseek = mock.post("http://deepseek.test/v1/chat/completions").respond(json=ANSWER)
        default = mock.post("http://default.test/v1/chat/completions").respond(json=ANSWER)
        models = mock.get("http://mistral.test/v1/models").respond(json={"data": []})
        async with running_proxy(settings) as proxy:
            client_auth = {"authorization": "Bearer client-key"}
            first = await proxy.client.post("/mistral/v1/chat/completions", json={"model": "mistral-large", "messages": ORPHAN}, headers=client_auth)
            second = await proxy.client.post("/v1/chat/completions", json={"model": "deepseek-reasoner", "messages": ORPHAN}, headers=AUTH)
            third = await proxy.client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, headers=AUTH)
            listed = await proxy.client.get("/mistral/v1/models", headers=client_auth)
            refused = await proxy.client.post("/mistral/v1/chat/completions", json={"messages": ORPHAN}, headers=AUTH)
            metrics = (await proxy.client.get("/metrics")).text
    assert first.status_code == second.status_code == third.status_code == listed.status_code == 200
    # The prefix route's host names no profile (mistral.test): its model, mistral-large, picks mistral's rules (9-character
    # ids for the synthesized call and its result, TM301); and the route sends its own key.
    assert mistral.calls.last.request.headers["authorization"] == "Bearer sk-mistral-upstream"
    assert first.headers["x-toolmend-repairs"] == "TM101=1,TM301=2"
    # The model route runs the deepseek profile: reasoning_content added to the synthesized call turn.
    assert b'"reasoning_content":""' in deepseek.calls.last.request.content
    assert default.called and models.called
    assert refused.status_code == 401  # a route with the proxy's own key needs a client key
    # Prefixed paths count under the same metric labels as the paths they prefix.
    assert 'toolmend_requests_total{route="chat",status="200"} 3.0' in metrics
    assert 'toolmend_requests_total{route="passthrough",status="200"} 1.0' in metrics


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[route]]\nupstream = 'ftp://x'\nprefix = '/a'", "must be an http(s) URL"),
        ("[[route]]\nupstream = 'http://u:sk-secret@x/v1'\nmodel = 'm'", "must not carry a query, fragment or user name"),
        ("[[route]]\nupstream = 'http://x/v1?key=k'\nmodel = 'm'", "must not carry a query, fragment or user name"),
        ("[[route]]\nupstream = 'http://x/v1'", "exactly one of 'prefix'"),
        ("[[route]]\nupstream = 'http://x/v1'\nprefix = 'a'", "'prefix' must be a path"),
        ("[[route]]\nupstream = 'http://x/v1'\nmodel = 'm'\nprofile = 'bogus'", "unknown profile 'bogus'"),
        ("[[route]]\nupstream = 'http://x/v1'\nmodel = 'm'\napi_key_env = 'UNSET_VAR_X'", "is not set"),
        ("[[route]]\nupstream = 'http://x/v1'\nmodel = 'm'\nkey = 'sk-secret'", "unknown key(s) key"),
        ("not toml [", "not valid TOML"),
    ],
)
def test_bad_route_files_stop_start_up_with_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load({"config": routes_file(tmp_path, text), "memory": "memory://"}, {})
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_route_key_without_client_keys_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TOOLMEND_API_KEYS is empty"):
        load({"config": routes_file(tmp_path), "memory": "memory://"}, {"TEST_MISTRAL_KEY": "k"})


def test_routes_parse(tmp_path: Path) -> None:
    prefix, model = load_routes(routes_file(tmp_path), {"TEST_MISTRAL_KEY": "k"}).routes
    assert (prefix.prefix, prefix.api_key, model.model, model.profile) == ("/mistral", "k", "deepseek-*", "deepseek")


async def test_tenants_are_scoped_per_upstream(tmp_path: Path) -> None:
    settings = settings_with_routes(tmp_path)
    async with running_proxy(settings) as proxy:
        router = proxy.state.router
        default_tenant = router.default.tenant([(b"authorization", b"Bearer k")], b"")
        routed_tenant = router.routes[1].tenant([(b"authorization", b"Bearer k")], b"")
    assert default_tenant != routed_tenant


def test_settings_reject_unknown_profile_in_flags() -> None:
    with pytest.raises(ConfigError):
        make_settings(profile="nope")


async def test_a_prefix_matches_only_up_to_a_slash(tmp_path: Path) -> None:
    text = "[[route]]\nprefix = '/mistral'\nupstream = 'http://mistral.test/v1'\n\n[[route]]\nprefix = '/mistralx'\nupstream = 'http://mistralx.test/v1'\n"
    settings = load({"upstream": "http://default.test/v1", "config": routes_file(tmp_path, text), "memory": "memory://"}, {})
    with respx.mock(assert_all_called=False) as mock:
        short = mock.get(url__startswith="http://mistral.test/").respond(json={"data": []})
        longer = mock.get("http://mistralx.test/v1/models").respond(json={"data": []})
        async with running_proxy(settings) as proxy:
            response = await proxy.client.get("/mistralx/v1/models", headers=AUTH)
            router = proxy.state.router
            assert router.select(b"/mistral/v1/models", b"")[0] is router.routes[0]
            assert router.select(b"/mistralx/v1/models", b"") == (router.routes[1], b"/models")
    assert response.status_code == 200
    assert longer.called and not short.called


async def test_an_encoded_prefix_or_version_is_refused_not_guessed(tmp_path: Path) -> None:
    # Starlette routes on the decoded path; toolmend on the raw one. Where they would disagree, it refuses.
    settings = settings_with_routes(tmp_path)
    with respx.mock(assert_all_called=False) as mock:
        upstream = mock.route().respond(json={"data": []})
        async with running_proxy(settings) as proxy:
            answers = [await proxy.client.get(path, headers={"authorization": "Bearer client-key"})
                       for path in ("/mistral%2Fv1/models", "/mistral/v1%2Fmodels", "/v1%2Fmodels/x")]
    assert [(a.status_code, a.json()["error"]["code"]) for a in answers] == [(400, "invalid_path")] * 3
    assert not upstream.called
