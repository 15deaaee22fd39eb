"""Which outbound proxy an upstream is reached through (issue 14 item 1), read from proxy/egress.py directly: which
variable for which scheme, which NO_PROXY entry bypasses it, ``--upstream-proxy`` over the environment, credentials
masked wherever a proxy URL is shown, and unusable settings stopping start-up. Through a real outbound proxy:
tests/system/test_egress_proxy.py."""

import re

import httpx
import pytest

from proxy.config import ConfigError, load
from proxy.egress import Egress, from_environment, mask

USER, PASSWORD = "toolmend", "s3cret-proxy-pass-4711"


# --- which proxy, from which variable ------------------------------------------------------------------


def proxy_host(egress: Egress, url: str) -> str | None:
    parsed = httpx.URL(url)
    proxy = egress.proxy_for(parsed.scheme, parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80))
    return proxy.host if proxy else None


def test_each_scheme_takes_its_variable_lowercase_first_and_all_proxy_fills_in() -> None:
    egress = from_environment({"HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3128", "ALL_PROXY": "every:8080"})
    assert proxy_host(egress, "https://api.openai.com/v1") == "lower"
    assert proxy_host(egress, "http://api.openai.com/v1") == "every"  # no HTTP_PROXY: ALL_PROXY, scheme-less = http://
    assert egress.http is not None and egress.http.port == 8080
    assert from_environment({"HTTPS_PROXY": "http://p:1", "https_proxy": ""}).https is None  # an empty one switches it off
    assert from_environment({}) == Egress()  # no variables: every upstream directly, the fast path


@pytest.mark.parametrize(("no_proxy", "url", "bypassed"), [
    ("*", "https://api.openai.com/v1", True),
    ("localhost, 127.0.0.1", "https://127.0.0.1:8443/v1", True),
    ("openai.com", "https://api.openai.com/v1", True),  # a domain covers its subdomains
    ("openai.com", "https://openai.com/v1", True),
    ("openai.com", "https://notopenai.com/v1", False),
    (".openai.com", "https://openai.com/v1", False),  # a leading dot: subdomains only (httpx)
    (".openai.com", "https://api.openai.com/v1", True),
    ("*.openai.com", "https://api.openai.com/v1", True),
    ("API.OpenAI.com.", "https://api.openai.com/v1", True),
    ("10.0.0.0/8", "http://10.1.2.3:8000/v1", True),  # a network
    ("10.0.0.0/8", "http://11.1.2.3:8000/v1", False),
    ("::1", "http://[::1]:8000/v1", True),
    ("[::1]:9000", "http://[::1]:8000/v1", False),  # with a port: that port only
    ("gateway.internal:8443", "https://gateway.internal:8443/v1", True),
    ("gateway.internal:8443", "https://gateway.internal/v1", False),
    ("https://gateway.internal", "https://gateway.internal/v1", True),  # a URL: its host (httpx accepts these)
])
def test_no_proxy_entries(no_proxy: str, url: str, bypassed: bool) -> None:
    egress = from_environment({"ALL_PROXY": "http://corp:3128", "NO_PROXY": no_proxy})
    assert proxy_host(egress, url) == (None if bypassed else "corp")


def test_upstream_proxy_wins_over_the_environment_and_none_connects_directly() -> None:
    environ = {"HTTPS_PROXY": "http://env:3128", "no_proxy": "internal"}
    egress = from_environment(environ, "http://flag:3128")
    assert proxy_host(egress, "https://api.openai.com/v1") == proxy_host(egress, "http://api.openai.com/v1") == "flag"
    assert proxy_host(egress, "https://gw.internal/v1") is None  # NO_PROXY still applies, as to curl --proxy
    assert from_environment(environ, "none") == Egress()


def test_proxy_credentials_are_masked_wherever_a_proxy_url_is_shown() -> None:
    egress = from_environment({"HTTPS_PROXY": f"http://{USER}:{PASSWORD}@corp:3128"})
    assert egress.describe("https://api.openai.com/v1") == "via proxy http://***@corp:3128"
    assert PASSWORD not in repr(egress) and PASSWORD not in str(egress.https)
    assert mask("http://user:pa/ss@w@rd@corp:3128") == "http://***@corp:3128"  # an unencoded / or @ leaks nothing
    assert egress.describe("https://api.openai.com/v1") == load({"upstream_proxy": f"{USER}:{PASSWORD}@corp:3128"}, {}).egress.describe(
        "https://api.openai.com/v1")


@pytest.mark.parametrize(("flags", "environ", "says"), [
    ({}, {"ALL_PROXY": f"socks5://{USER}:{PASSWORD}@corp:1080"}, "ALL_PROXY: a socks5:// proxy is not supported"),
    ({"upstream_proxy": f"https://{USER}:{PASSWORD}@corp:3128"}, {}, "--upstream-proxy: a https:// proxy is not supported"),
    ({"upstream_proxy": f"http://{USER}:{PASSWORD}@corp:port"}, {}, "--upstream-proxy: 'http://***@corp:port' is not a proxy URL"),
    ({"upstream_ca_file": "/nonexistent/ca.pem"}, {}, "--upstream-ca-file '/nonexistent/ca.pem' cannot be loaded"),
])
def test_unusable_egress_settings_stop_start_up_without_showing_credentials(flags: dict, environ: dict, says: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(says)) as raised:
        load(flags, environ)
    assert PASSWORD not in str(raised.value)
