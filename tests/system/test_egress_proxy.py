"""Reaching upstreams through an outbound proxy, and trusting a private CA (issue 14 item 1).

The proxy is a real one: Debian's tinyproxy, started per test on a free loopback port with basic auth and
its CONNECT ports configured (tests/support/tinyproxy.py); its own log says what it was asked to carry. The
upstream speaks TLS with a certificate from a CA made at test time (tests/support/private_ca.py), as an
internal provider gateway or a TLS-inspecting corporate proxy would. Environment semantics (which variable,
which NO_PROXY entry) are checked on proxy/egress.py directly (tests/unit/test_egress.py); the wire behaviour through
FastTransport; the client's answers through the app, and the logs through a real ``toolmend serve`` process.
"""

import asyncio
import base64
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from proxy.app import create_app
from proxy.config import load
from proxy.egress import from_environment
from proxy.transport import MAX_HEAD_BYTES, CertificateError, FastTransport, OutboundProxyError
from tests.support.private_ca import PrivateCA, make_private_ca
from tests.support.processes import ProxyProcess, free_port
from tests.support.raw_server import RawServer, ServerConn, ok, respond
from tests.support.strict_upstream import serve
from tests.support.tinyproxy import Tinyproxy
from tests.unit.test_egress import PASSWORD, USER

GUARD = 30.0  # a hang guard; a passing test takes a fraction of a second
TIMEOUTS = {"timeout": {"connect": GUARD / 2, "read": GUARD / 2, "write": GUARD / 2, "pool": GUARD / 2}}
WRONG = "wrong-pass-0815"


# --- the wire, through tinyproxy -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    return make_private_ca(tmp_path_factory.mktemp("private-ca"))


@pytest.fixture
def tls_upstream_port() -> int:
    return free_port()


class TLSUpstream:
    """An https upstream on loopback with the private CA's certificate; answers every request 200 "ok"."""

    def __init__(self, ca: PrivateCA, port: int) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(ca.server_cert, ca.server_key)
        self.port, self.targets, self.accepts = port, [], 0
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/v1/models"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepts += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.CancelledError):
            while head := await reader.readuntil(b"\r\n\r\n"):
                self.targets.append(head.split(b" ")[1])
                writer.write(ok())
                await writer.drain()
        writer.close()

    async def __aenter__(self) -> "TLSUpstream":
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", self.port, ssl=self.context)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


@pytest.fixture
async def upstream(private_ca: PrivateCA, tls_upstream_port: int) -> AsyncIterator[TLSUpstream]:
    async with TLSUpstream(private_ca, tls_upstream_port) as server:
        yield server


@pytest.fixture
def tinyproxy(tmp_path: Path, tls_upstream_port: int) -> Iterator[Tinyproxy]:
    with Tinyproxy(tmp_path, (tls_upstream_port,), USER, PASSWORD) as proxy:
        yield proxy


@contextlib.asynccontextmanager
async def transport_for(environ: dict[str, str], ca_file: str | None = None) -> AsyncIterator[FastTransport]:
    transport = FastTransport(egress=from_environment(environ), ca_file=ca_file)
    try:
        yield transport
    finally:
        await transport.aclose()


async def get(transport: FastTransport, url: str) -> tuple[int, bytes]:
    async with asyncio.timeout(GUARD):
        response = await transport.handle_async_request(httpx.Request("GET", url, extensions=TIMEOUTS))
        return response.status_code, await response.aread()


async def test_https_upstream_through_a_connect_tunnel(upstream: TLSUpstream, tinyproxy: Tinyproxy, private_ca: PrivateCA) -> None:
    async with transport_for({"HTTPS_PROXY": tinyproxy.url(USER, PASSWORD)}, ca_file=private_ca.ca_cert) as transport:
        for _ in range(3):
            assert await get(transport, upstream.url) == (200, b"ok")
    # One tunnel, kept alive and reused; inside it TLS with the upstream itself, and origin-form requests.
    assert tinyproxy.requests() == [f"CONNECT 127.0.0.1:{upstream.port} HTTP/1.1"]
    assert upstream.accepts == 1 and upstream.targets == [b"/v1/models"] * 3


async def test_ssl_cert_file_trusts_the_private_ca(upstream: TLSUpstream, tinyproxy: Tinyproxy, private_ca: PrivateCA,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", private_ca.ca_cert)
    async with transport_for({"https_proxy": tinyproxy.url(USER, PASSWORD)}) as transport:
        assert await get(transport, upstream.url) == (200, b"ok")
    assert len(tinyproxy.requests()) == 1


async def test_an_unreadable_ssl_cert_file_is_a_connect_error(upstream: TLSUpstream, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    async with transport_for({}) as transport:
        with pytest.raises(httpx.ConnectError, match="No such file"):
            await get(transport, upstream.url)


async def test_no_proxy_bypasses_the_proxy(upstream: TLSUpstream, tinyproxy: Tinyproxy, private_ca: PrivateCA) -> None:
    environ = {"HTTPS_PROXY": tinyproxy.url(USER, PASSWORD), "NO_PROXY": "localhost,127.0.0.1"}
    async with transport_for(environ, ca_file=private_ca.ca_cert) as transport:
        assert await get(transport, upstream.url) == (200, b"ok")
    assert tinyproxy.requests() == [] and upstream.accepts == 1


async def test_plain_http_upstream_through_the_proxy(tmp_path: Path) -> None:
    async with RawServer(respond(lambda r: ok(r.target + b" " + (r.header(b"proxy-authorization") or b"-")))) as plain:
        with Tinyproxy(tmp_path, (), USER, PASSWORD) as proxy:
            async with transport_for({"HTTP_PROXY": proxy.url(USER, PASSWORD)}) as transport:
                assert await get(transport, plain.url("/v1/models?a=1")) == (200, b"/v1/models?a=1 -")
            # The proxy got the absolute URL (and the credentials it wanted: no 407); the upstream, none of them.
            assert proxy.requests() == [f"GET http://127.0.0.1:{plain.port}/v1/models?a=1 HTTP/1.1"]


async def test_a_407_from_the_proxy_to_a_plain_http_request_is_not_taken_for_the_upstreams_answer() -> None:
    refusal = b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=corp\r\nContent-Length: 0\r\n\r\n"
    async with RawServer(respond(lambda r: refusal)) as squid_like:  # squid says 407; tinyproxy says 401 instead
        async with transport_for({"HTTP_PROXY": f"http://{USER}:{WRONG}@127.0.0.1:{squid_like.port}"}) as transport:
            with pytest.raises(OutboundProxyError, match="it answered 407 Proxy Authentication Required"):
                await get(transport, "http://127.0.0.1:9/v1/models")
        assert squid_like.requests[0].target == b"http://127.0.0.1:9/v1/models"
        assert squid_like.requests[0].header(b"proxy-authorization") == b"Basic " + base64.b64encode(f"{USER}:{WRONG}".encode())


async def test_wrong_proxy_credentials_are_refused_naming_the_answer_not_the_password(
        upstream: TLSUpstream, tinyproxy: Tinyproxy, private_ca: PrivateCA, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with transport_for({"HTTPS_PROXY": tinyproxy.url(USER, WRONG)}, ca_file=private_ca.ca_cert) as transport:
        with pytest.raises(OutboundProxyError, match=r"refused to carry the request to the upstream: it answered 40[17] ") as raised:
            await get(transport, upstream.url)
    assert WRONG not in str(raised.value) and str(tinyproxy.port) not in str(raised.value)
    assert f"the outbound proxy http://***@127.0.0.1:{tinyproxy.port} answered 40" in caplog.text  # the operator's clue
    assert WRONG not in caplog.text and upstream.accepts == 0


async def test_a_proxy_that_refuses_the_port_is_a_proxy_error(upstream: TLSUpstream, tmp_path: Path, private_ca: PrivateCA) -> None:
    with Tinyproxy(tmp_path, (upstream.port + 1,)) as proxy:  # CONNECT allowed to another port only
        async with transport_for({"HTTPS_PROXY": proxy.url()}, ca_file=private_ca.ca_cert) as transport:
            with pytest.raises(OutboundProxyError, match="it answered 403"):
                await get(transport, upstream.url)


@pytest.mark.parametrize("answer", [b"HTTP/1.1 302 Found\r\nLocation: http://login.corp.example/\r\nContent-Length: 0\r\n\r\n",
                                    b"HTTP/1.1 101 Switching Protocols\r\n\r\n", b"HTTP/1.1 199 Odd\r\n\r\n"],
                         ids=["302", "101", "199"])
async def test_any_answer_to_connect_but_2xx_is_a_proxy_error_naming_it(upstream: TLSUpstream, answer: bytes) -> None:
    """A captive-portal redirect (or any status outside 2xx) opens no tunnel: taken for one, the TLS hello would wait
    on a proxy that is done talking, and the client would see a timeout instead of what the proxy said."""
    async with RawServer(respond(lambda r: answer)) as portal:
        async with transport_for({"HTTPS_PROXY": f"127.0.0.1:{portal.port}"}) as transport:
            with pytest.raises(OutboundProxyError, match=f"it answered {answer[9:12].decode()} "):
                await get(transport, upstream.url)
        assert [request.method for request in portal.requests] == ["CONNECT"]
    assert upstream.accepts == 0


async def test_an_unreachable_proxy_is_a_proxy_error(upstream: TLSUpstream) -> None:
    async with transport_for({"HTTPS_PROXY": f"http://{USER}:{PASSWORD}@127.0.0.1:{free_port()}"}) as transport:
        with pytest.raises(OutboundProxyError, match=r"^The outbound proxy could not be reached \(Connection refused\)\.$"):
            await get(transport, upstream.url)


async def test_an_untrusted_upstream_certificate_through_the_tunnel(upstream: TLSUpstream, tinyproxy: Tinyproxy) -> None:
    async with transport_for({"HTTPS_PROXY": tinyproxy.url(USER, PASSWORD)}) as transport:  # certifi / system CAs only
        with pytest.raises(CertificateError, match=r"certificate could not be verified \(.*certificate.*\)"):
            await get(transport, upstream.url)
    assert len(tinyproxy.requests()) == 1  # the tunnel opened; TLS inside it failed


async def endless_connect_answer(conn: ServerConn) -> None:
    await conn.reader.readuntil(b"\r\n\r\n")
    await conn.send(b"HTTP/1.1 200 Connection established\r\n")
    while True:  # until the client hangs up
        await conn.send(b"X-Filler: " + b"a" * 1000 + b"\r\n")


async def test_a_proxy_answer_without_end_is_cut_off(upstream: TLSUpstream) -> None:
    async with RawServer(endless_connect_answer) as fake_proxy:
        async with transport_for({"HTTPS_PROXY": f"127.0.0.1:{fake_proxy.port}"}) as transport:
            with pytest.raises(httpx.ProxyError, match=f"larger than {MAX_HEAD_BYTES} bytes"):
                await get(transport, upstream.url)
        assert upstream.accepts == 0


# --- what the client and the operator see --------------------------------------------------------------


async def answer_through_app(settings_flags: dict, environ: dict) -> httpx.Response:
    app = create_app(load({"memory": "memory://", **settings_flags}, environ))  # the real transport, from the settings
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
            return await client.get("/v1/models")


async def test_the_client_gets_a_502_naming_the_proxys_answer(upstream: TLSUpstream, tinyproxy: Tinyproxy, private_ca: PrivateCA) -> None:
    flags = {"upstream": f"https://127.0.0.1:{upstream.port}/v1", "upstream_ca_file": private_ca.ca_cert}
    response = await answer_through_app(flags, {"HTTPS_PROXY": tinyproxy.url(USER, WRONG)})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_proxy_error"
    assert error["message"].startswith("The outbound proxy refused to carry the request to the upstream: it answered 40")
    assert WRONG not in response.text
    assert (await answer_through_app(flags, {"HTTPS_PROXY": tinyproxy.url(USER, PASSWORD)})).status_code == 200


async def test_the_client_gets_a_502_when_the_upstream_certificate_is_untrusted(upstream: TLSUpstream, tinyproxy: Tinyproxy) -> None:
    response = await answer_through_app({"upstream": f"https://127.0.0.1:{upstream.port}/v1"}, {"HTTPS_PROXY": tinyproxy.url(USER, PASSWORD)})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_certificate_error"
    assert error["message"].startswith("The upstream's TLS certificate could not be verified (")


async def models(scope: dict, receive, send) -> None:
    """The TLS upstream for the served tests: every request gets an empty model list."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"object":"list","data":[]}'})


def test_served_through_a_corporate_proxy_with_credentials_kept_out_of_the_log(private_ca: PrivateCA, tmp_path: Path) -> None:
    with serve(models, ssl_certfile=private_ca.server_cert, ssl_keyfile=private_ca.server_key) as url:
        port = int(url.rsplit(":", 1)[1])
        upstream = f"https://127.0.0.1:{port}/v1"
        with Tinyproxy(tmp_path, (port,), USER, PASSWORD) as proxy:
            for password, status in ((PASSWORD, 200), (WRONG, 502)):
                env = {"HTTPS_PROXY": proxy.url(USER, password), "SSL_CERT_FILE": private_ca.ca_cert}
                with ProxyProcess(upstream, "--memory", "memory://", "--log-level", "debug", env=env) as served:
                    answer = httpx.get(served.url + "/v1/models", timeout=GUARD)
                    log = served.log()
                assert answer.status_code == status, answer.text
                assert f"forwarding to {upstream} via proxy http://***@127.0.0.1:{proxy.port}" in log
                assert password not in log and password not in answer.text
            assert proxy.requests() == [f"CONNECT 127.0.0.1:{port} HTTP/1.1"] * 2
