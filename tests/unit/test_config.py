"""Settings: flag beats environment beats default; every bad setting is a one-line ConfigError naming it."""

import os

import pytest

from proxy.app import create_app
from proxy.config import SERVE_OPTIONS, ConfigError, Settings, load
from proxy.memory.inprocess import InProcessStore
from proxy.repair import Policy


def flags(**given):
    return {option.name: given.get(option.name) for option in SERVE_OPTIONS}


def test_defaults():
    settings = load(flags(), {})
    # `toolmend serve` remembers in the per-user SQLite file; a Settings built directly keeps memory://.
    assert settings == Settings(memory=f"sqlite://{os.path.expanduser('~')}/.local/state/toolmend/memory.db")
    assert load(flags(), {"XDG_STATE_HOME": "/var/state"}).memory == "sqlite:///var/state/toolmend/memory.db"
    assert settings.upstream == "https://api.openai.com/v1"
    assert (settings.port, settings.workers, settings.profile, settings.orphan_policy) == (8080, 1, "auto", "synthesize")
    assert settings.upstream_api_key is None and settings.api_keys == frozenset()


def test_environment_beats_default_and_is_converted():
    env = {"TOOLMEND_PORT": "9000", "TOOLMEND_MEMORY_TTL": "2.5", "TOOLMEND_UPSTREAM": "http://up:1/v1",
           "TOOLMEND_ORPHAN_POLICY": "drop", "TOOLMEND_MAX_BODY_BYTES": "2048", "TOOLMEND_LOG_LEVEL": "debug",
           "TOOLMEND_THINKING_POLICY": "reject"}
    settings = load(flags(), env)
    assert (settings.port, settings.memory_ttl, settings.upstream, settings.thinking_policy) == (9000, 2.5, "http://up:1/v1", "reject")
    assert (settings.orphan_policy, settings.max_body_bytes, settings.log_level) == ("drop", 2048, "debug")


def test_flag_beats_environment():
    settings = load(flags(port="7000", upstream="http://flag/v1"), {"TOOLMEND_PORT": "9000", "TOOLMEND_UPSTREAM": "http://env/v1"})
    assert (settings.port, settings.upstream) == (7000, "http://flag/v1")


def test_a_valid_flag_hides_a_bad_environment_value():
    assert load(flags(port="7000"), {"TOOLMEND_PORT": "not-a-port"}).port == 7000


def test_credential_headers_come_from_repeated_flags_or_one_comma_separated_variable():
    assert load(flags(credential_header=["X-My-Key", "x-team"]), {"TOOLMEND_CREDENTIAL_HEADER": "x-env"}).credential_header == ("x-my-key", "x-team")
    assert load(flags(), {"TOOLMEND_CREDENTIAL_HEADER": " X-My-Key ,, x-team"}).credential_header == ("x-my-key", "x-team")
    assert load(flags(), {}).credential_header == ()


def test_upstream_key_mode_comes_from_the_environment_only():
    settings = load(flags(), {"TOOLMEND_UPSTREAM_API_KEY": "sk-up", "TOOLMEND_API_KEYS": " a , b,,c "})
    assert settings.upstream_api_key == "sk-up"
    assert settings.api_keys == frozenset({"a", "b", "c"})
    assert not any(option.name in ("upstream_api_key", "api_keys") for option in SERVE_OPTIONS)


BAD_FLAGS = [
    ("upstream", "ftp://host/v1", "--upstream"),
    ("upstream", "not a url", "--upstream"),
    ("upstream", "http:///v1", "--upstream"),
    ("upstream", "http://host/v1?key=1", "--upstream"),
    ("upstream", "http://host/v1#frag", "--upstream"),
    ("port", "abc", "--port"),
    ("port", "80.5", "--port"),
    ("port", "65536", "--port"),
    ("port", "-1", "--port"),
    ("workers", "0", "--workers"),
    ("workers", "two", "--workers"),
    ("profile", "nope", "--profile"),
    ("orphan_policy", "keep", "--orphan-policy"),
    ("thinking_policy", "invent", "--thinking-policy"),
    ("memory", "mongodb://localhost", "--memory"),
    ("memory", "no-scheme", "--memory"),
    ("memory", "redis://localhost:port/0", "--memory"),
    ("memory", "redis://localhost:70000", "--memory"),
    ("memory", "redis:///0", "--memory"),
    ("memory", "redis://localhost/cache", "--memory"),
    ("memory", "sqlite://", "--memory"),
    ("memory", "sqlite:///var/lib/toolmend/", "--memory"),
    ("memory", "sqlite://:memory:", "--memory"),
    ("memory", "sqlite:///x.db?mode=ro", "--memory"),
    ("memory_ttl", "0", "--memory-ttl"),
    ("memory_ttl", "-5", "--memory-ttl"),
    ("memory_ttl", "soon", "--memory-ttl"),
    ("memory_max_entries", "0", "--memory-max-entries"),
    ("upstream_timeout", "0", "--upstream-timeout"),
    ("upstream_timeout", "-1", "--upstream-timeout"),
    ("max_body_bytes", "1023", "--max-body-bytes"),
    ("max_body_bytes", "1MB", "--max-body-bytes"),
    ("log_level", "verbose", "--log-level"),
    ("send_timeout", "0", "--send-timeout"),
    ("credential_header", "x-key, bad header", "--credential-header"),
]


@pytest.mark.parametrize(("name", "value", "flag"), BAD_FLAGS)
def test_bad_flag_is_a_one_line_error_naming_the_flag(name, value, flag):
    with pytest.raises(ConfigError) as raised:
        load(flags(**{name: value}), {})
    message = str(raised.value)
    assert flag in message
    assert "\n" not in message


@pytest.mark.parametrize(("name", "value", "flag"), BAD_FLAGS)
def test_bad_environment_value_is_a_one_line_error_naming_the_setting(name, value, flag):
    env_var = "TOOLMEND_" + name.upper()
    with pytest.raises(ConfigError) as raised:
        load(flags(), {env_var: value})
    message = str(raised.value)
    assert env_var in message or flag in message
    assert "\n" not in message


def test_unparseable_environment_value_names_the_environment_variable():
    with pytest.raises(ConfigError, match="TOOLMEND_PORT='x'"):
        load(flags(), {"TOOLMEND_PORT": "x"})


def test_upstream_key_without_client_keys_is_refused():
    with pytest.raises(ConfigError) as raised:
        load(flags(), {"TOOLMEND_UPSTREAM_API_KEY": "sk-up", "TOOLMEND_API_KEYS": " , "})
    message = str(raised.value)
    assert "TOOLMEND_UPSTREAM_API_KEY" in message and "TOOLMEND_API_KEYS" in message and "\n" not in message
    assert "sk-up" not in message  # the key itself is never echoed


def test_settings_are_checked_even_when_built_directly():
    with pytest.raises(ConfigError, match="--workers"):
        Settings(workers=0)


@pytest.mark.parametrize(("name", "flag"), [("memory_ttl", "--memory-ttl"), ("upstream_timeout", "--upstream-timeout")])
def test_nan_durations_are_refused(name, flag):
    with pytest.raises(ConfigError, match=flag):
        load(flags(**{name: "nan"}), {})


@pytest.mark.parametrize(
    ("upstream", "expected"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://myres.openai.azure.com/openai/deployments/x", "openai"),
        ("https://api.mistral.ai/v1", "mistral"),
        ("https://api.deepseek.com/v1", "deepseek"),
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://generativelanguage.googleapis.com/v1beta/openai", "gemini"),
        ("https://api.anthropic.com/v1", "anthropic"),
        ("https://api.x.ai/v1", "xai"),
        ("http://localhost:11434/v1", "ollama"),
        ("https://api.z.ai/api/anthropic/v1", "zai"),
        ("https://open.bigmodel.cn/api/paas/v4", "zai"),
        ("http://10.0.0.5:8000/v1", "openai"),
    ],
)
def test_profile_is_detected_from_the_upstream_host(upstream, expected):
    from proxy.dialects.chat.profiles import route_profile

    assert route_profile(upstream, "auto")[0].name == expected


def test_unknown_profile_is_refused():
    with pytest.raises(ConfigError, match="--profile 'bogus' is unknown"):
        load(flags(profile="bogus"), {})


#: The Gemini policies an operator opts into: each a Settings field and a Policy field of one name.
OPT_INS = ("dummy_signatures", "continue_model_turn")


@pytest.mark.parametrize("name", OPT_INS)
def test_gemini_opt_ins_are_off_unless_opted_in(name: str) -> None:
    assert getattr(load({}, {}), name) is False
    assert getattr(load({name: True}, {}), name) is True
    assert getattr(load({}, {f"TOOLMEND_{name.upper()}": "true"}), name) is True
    assert getattr(Policy(), name) is False


@pytest.mark.parametrize("name", OPT_INS)
async def test_the_opt_in_reaches_the_repair_policy(name: str) -> None:
    app = create_app(Settings(**{name: True}), store=InProcessStore(60, 10))
    async with app.router.lifespan_context(app):
        assert app.state.proxy.policy == Policy(**{name: True})
