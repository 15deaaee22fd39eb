"""Keys that rotate (toolmend issue 14, item 3): a named tenant keeps its memory whichever of its keys a
client presents; ``--tenant-scope upstream`` shares one memory per upstream; the default stays per credential.

Every test goes through the app: the upstream (respx) answers a tool call under one credential, and a later
request under another credential sends a history that lost it. A recall re-inserts the remembered call
exactly as the upstream sent it; a miss synthesizes ``unknown_tool``.
"""

from pathlib import Path

import httpx
import orjson
import pytest
import respx

from proxy.config import ConfigError, load
from tests.support.proxy_fixtures import UPSTREAM, call, completion, error_of, make_settings, orphan_history, running_proxy

OPERATOR_KEY = "sk-operator-upstream-key"
# Arguments as the upstream sent them, spacing included: a recall forwards this text, not a re-serialization.
ARGUMENTS = '{"city":  "Lyon", "unit": "C"}'
REMEMBERED = call("call_rotated_1", name="lookup_weather", arguments=ARGUMENTS)
HELLO = [{"role": "user", "content": "Weather in Lyon?"}]
ANSWER = {"id": "c", "object": "chat.completion", "choices": []}

TENANTS = """
[[tenant]]
name = "team-a"
keys_env = "TEAM_A_KEYS"

[[tenant]]
name = "team-b"
keys_env = "TEAM_B_KEYS"
"""
TENANT_ENV = {"TEAM_A_KEYS": "tm-a1, tm-a2", "TEAM_B_KEYS": "tm-b1", "TOOLMEND_UPSTREAM_API_KEY": OPERATOR_KEY}


def settings_from(tmp_path: Path, text: str, environ: dict[str, str], **flags: str):
    path = tmp_path / "routes.toml"
    path.write_text(text)
    return load({"upstream": UPSTREAM, "config": str(path), "memory": "memory://", **flags}, environ)


async def remember_then_recall(settings, first: dict[str, str], later: list[dict[str, str]]) -> list[dict]:
    """The upstream makes REMEMBERED under the ``first`` headers; each of ``later`` then sends a history that
    lost it. Returns the assistant message forwarded upstream for each of ``later``."""
    with respx.mock(assert_all_called=False) as mock:
        chat = mock.post(f"{UPSTREAM}/chat/completions")
        chat.side_effect = [httpx.Response(200, json=completion([REMEMBERED])), *(httpx.Response(200, json=ANSWER) for _ in later)]
        async with running_proxy(settings) as proxy:
            made = await proxy.client.post("/v1/chat/completions", json={"messages": HELLO}, headers=first)
            assert made.status_code == 200
            for headers in later:
                repaired = await proxy.client.post("/v1/chat/completions", json={"messages": orphan_history("call_rotated_1")},
                                                   headers=headers)
                assert (repaired.status_code, repaired.headers["x-toolmend-repairs"]) == (200, "TM101=1")
    return [orjson.loads(sent.request.content)["messages"][1] for sent in chat.calls[1:]]


def recalled(message: dict) -> bool:
    """Whether the forwarded assistant message is the remembered call, exactly; else it was synthesized."""
    if message["tool_calls"][0]["function"]["name"] == "unknown_tool":
        return False
    assert message["tool_calls"] == [REMEMBERED]
    return True


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def test_a_rotated_key_of_a_named_tenant_recalls_its_calls_and_another_tenant_does_not(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, TENANTS, TENANT_ENV)
    rotated, other_tenant, first_again = await remember_then_recall(settings, bearer("tm-a1"), [bearer("tm-a2"), bearer("tm-b1"),
                                                                                                bearer("tm-a1")])
    assert recalled(rotated)
    assert not recalled(other_tenant)
    assert recalled(first_again)


async def test_tenant_keys_are_client_keys_in_upstream_key_mode_and_never_go_upstream(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, TENANTS, TENANT_ENV)  # no TOOLMEND_API_KEYS at all
    with respx.mock(assert_all_called=False) as mock:
        chat = mock.post(f"{UPSTREAM}/chat/completions").respond(json=ANSWER)
        async with running_proxy(settings) as proxy:
            member = await proxy.client.post("/v1/chat/completions", json={"messages": HELLO}, headers=bearer("tm-a2"))
            stranger = await proxy.client.post("/v1/chat/completions", json={"messages": HELLO}, headers=bearer("tm-c1"))
    assert member.status_code == 200
    assert (stranger.status_code, error_of(stranger)["code"]) == (401, "invalid_api_key")
    assert chat.call_count == 1
    assert chat.calls.last.request.headers.get_list("authorization") == [f"Bearer {OPERATOR_KEY}"]


async def test_a_client_key_outside_every_tenant_keeps_its_own_memory(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, TENANTS, {**TENANT_ENV, "TOOLMEND_API_KEYS": "tm-solo"})
    from_solo, from_team = await remember_then_recall(settings, bearer("tm-a1"), [bearer("tm-solo"), bearer("tm-a2")])
    assert not recalled(from_solo)
    assert recalled(from_team)


@pytest.mark.parametrize(("scope", "shared"), [("credential", False), ("upstream", True)])
async def test_tenant_scope_upstream_shares_memory_across_credentials_and_the_default_does_not(scope: str, shared: bool) -> None:
    settings = make_settings(memory="memory://", tenant_scope=scope)
    other_key, anonymous = await remember_then_recall(settings, bearer("sk-own-key-1"), [bearer("sk-own-key-2"), {}])
    assert recalled(other_key) is shared
    assert recalled(anonymous) is shared


def test_the_default_tenant_scope_is_per_credential() -> None:
    assert load({"memory": "memory://"}, {}).tenant_scope == "credential"
    assert load({"memory": "memory://"}, {"TOOLMEND_TENANT_SCOPE": "upstream"}).tenant_scope == "upstream"


@pytest.mark.parametrize(
    ("text", "environ", "message"),
    [
        (TENANTS, {"TEAM_A_KEYS": "tm-a1"}, "tenant 2 ('team-b'): keys_env names 'TEAM_B_KEYS', which is not set or holds no keys"),
        (TENANTS, {"TEAM_A_KEYS": "tm-a1", "TEAM_B_KEYS": " , "}, "which is not set or holds no keys"),
        (TENANTS, {"TEAM_A_KEYS": "tm-a1,tm-shared", "TEAM_B_KEYS": "tm-shared"},
         "tenant 2 ('team-b'): a key in TEAM_B_KEYS is also a key of tenant 'team-a'"),
        ("[[tenant]]\nname = 'team-a'\nkeys_env = 'TEAM_A_KEYS'\nkeys = ['tm-secret']", {"TEAM_A_KEYS": "k"},
         "tenant 1: unknown key(s) keys; allowed: keys_env, name"),
        ("[[tenant]]\nkeys_env = 'TEAM_A_KEYS'", {"TEAM_A_KEYS": "k"}, "tenant 1: 'name' must be"),
        ("[[tenant]]\nname = 'team a'\nkeys_env = 'TEAM_A_KEYS'", {"TEAM_A_KEYS": "k"}, "tenant 1: 'name' must be"),
        ("[[tenant]]\nname = 'team-a'", {}, "tenant 1 ('team-a'): 'keys_env' must name"),
        (TENANTS.replace("team-b", "team-a"), {"TEAM_A_KEYS": "k1", "TEAM_B_KEYS": "k2"}, "tenant 2 ('team-a'): another tenant has this name"),
        ("[tenant]\nname = 'team-a'", {}, "expected only [[route]] and [[tenant]] tables"),
    ],
)
def test_bad_tenant_tables_stop_start_up_with_one_line(tmp_path: Path, text: str, environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from(tmp_path, text, environ)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert "tm-shared" not in str(error.value) and "tm-secret" not in str(error.value)  # keys never appear in errors


@pytest.mark.parametrize(
    ("text", "environ", "flags", "message"),
    [
        ("", {}, {"tenant_scope": "team"}, "--tenant-scope 'team' is unknown; choose one of: credential, upstream"),
        (TENANTS, TENANT_ENV, {"tenant_scope": "upstream"}, "--tenant-scope upstream shares one memory per upstream: [[tenant]] tables"),
    ],
)
def test_bad_tenant_scopes_stop_start_up_with_one_line(tmp_path: Path, text: str, environ: dict[str, str], flags: dict[str, str],
                                                       message: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from(tmp_path, text, environ, **flags)
    assert message in str(error.value) and "\n" not in str(error.value)


async def test_a_tenant_key_never_reaches_a_route_without_a_key_of_its_own(tmp_path: Path) -> None:
    settings = settings_from(tmp_path, TENANTS, {"TEAM_A_KEYS": "tm-a1", "TEAM_B_KEYS": "tm-b1"})  # the default route has no key
    with respx.mock(assert_all_called=False) as mock:
        chat = mock.post(url__startswith=f"{UPSTREAM}/chat/completions").respond(json=ANSWER)
        async with running_proxy(settings) as proxy:
            sent = await proxy.client.post("/v1/chat/completions?key=tm-a1", json={"messages": HELLO},
                                           headers={**bearer("tm-a1"), "x-api-key": "tm-b1", "api-key": "sk-own-azure"})
    assert sent.status_code == 200
    forwarded = chat.calls.last.request
    seen = " ".join([str(forwarded.url), *(value for _, value in forwarded.headers.multi_items())])
    assert "tm-a1" not in seen and "tm-b1" not in seen
    assert "authorization" not in forwarded.headers and forwarded.headers["api-key"] == "sk-own-azure"


# --- credentials in gateway headers, and in headers the operator names (issue 23) ------------------------


@pytest.mark.parametrize("carrier", ["Ocp-Apim-Subscription-Key", "cf-aig-authorization", "x-portkey-api-key"])
async def test_clients_whose_only_credential_is_a_gateway_key_keep_their_own_memory(carrier: str) -> None:
    settings = make_settings(memory="memory://")
    other_key, anonymous, same_key = await remember_then_recall(
        settings, {carrier: "Bearer gw-key-1"}, [{carrier: "Bearer gw-key-2"}, {}, {carrier: "Bearer gw-key-1"}])
    assert not recalled(other_key)
    assert not recalled(anonymous)
    assert recalled(same_key)


async def test_a_credential_header_the_operator_names_separates_tenants() -> None:
    settings = load({"upstream": UPSTREAM, "memory": "memory://", "credential_header": ["X-My-Key"]}, {})
    other_key, anonymous, same_key = await remember_then_recall(
        settings, {"x-my-key": "mine-1"}, [{"x-my-key": "mine-2"}, {}, {"X-My-Key": "mine-1"}])
    assert not recalled(other_key)
    assert not recalled(anonymous)
    assert recalled(same_key)


async def test_a_credential_header_the_operator_names_counts_as_a_credential_for_require_client_key() -> None:
    settings = load({"upstream": UPSTREAM, "memory": "memory://", "require_client_key": True}, {"TOOLMEND_CREDENTIAL_HEADER": "x-my-key, x-team"})
    with respx.mock(assert_all_called=False) as mock:
        mock.post(f"{UPSTREAM}/chat/completions").respond(json=ANSWER)
        async with running_proxy(settings) as proxy:
            named = await proxy.client.post("/v1/chat/completions", json={"messages": HELLO}, headers={"x-team": "t"})
            gateway = await proxy.client.post("/v1/chat/completions", json={"messages": HELLO}, headers={"ocp-apim-subscription-key": "a"})
            unknown = await proxy.client.post("/v1/chat/completions", json={"messages": HELLO}, headers={"x-other": "o"})
    assert (named.status_code, gateway.status_code) == (200, 200)
    assert (unknown.status_code, error_of(unknown)["code"]) == (401, "missing_api_key")


@pytest.mark.parametrize(("flags", "environ", "warned"), [
    ({}, {}, True),
    ({"credential_header": ["x-my-key"]}, {}, True),
    ({"require_client_key": True}, {}, False),
    ({"tenant_scope": "upstream"}, {}, False),  # warned otherwise: every client shares one memory
    ({}, {"TOOLMEND_UPSTREAM_API_KEY": OPERATOR_KEY, "TOOLMEND_API_KEYS": "tm-1"}, False),  # no client without a key gets in
])
async def test_a_start_up_warning_when_requests_without_a_credential_would_share_memory(caplog, flags, environ, warned) -> None:
    settings = load({"upstream": UPSTREAM, "memory": "memory://", **flags}, environ)
    async with running_proxy(settings):
        pass
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "carry no credential" in r.getMessage()]
    assert len(warnings) == (1 if warned else 0)
    if warned:
        assert "ocp-apim-subscription-key" in warnings[0] and ("x-my-key" in warnings[0]) == bool(flags)
