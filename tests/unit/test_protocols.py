"""A request's protocol, decided once from its path: the endpoint that repairs it, its metrics label and the shape of
every error toolmend makes for it, whichever layer makes it."""

import re

import httpx
import pytest
import respx

from proxy.dialects import CHAT, DIALECTS, GEMINI, MESSAGES, RESPONSES
from proxy.dialects.chat import ChatDialect
from proxy.errors import error_response
from proxy.protocols import Protocols
from proxy.routes import RouteSpec
from tests.support.proxy_fixtures import AUTH, UPSTREAM, make_settings, running_proxy

PROTOCOLS = Protocols(DIALECTS, ["/claude"], by_header={b"anthropic-version": MESSAGES})
ANTHROPIC = {"x-api-key": "sk-ant-x", "anthropic-version": "2023-06-01"}


@pytest.mark.parametrize("root", ["", "/claude"])
@pytest.mark.parametrize(("path", "dialect"), [("/chat/completions", CHAT), ("/responses", RESPONSES),
                                               ("/messages", MESSAGES), ("/messages/count_tokens", MESSAGES)])
def test_each_repaired_endpoint_is_its_dialect_s_at_v1_and_under_a_route_prefix(root: str, path: str, dialect) -> None:
    protocol = PROTOCOLS.of(root + "/v1" + path)
    assert (protocol.dialect, protocol.label, protocol.error) == (dialect, dialect.name, dialect.error)


def test_other_paths_pass_through_in_the_shape_of_the_protocol_they_belong_to() -> None:
    below = PROTOCOLS.of("/v1/messages/batches")
    assert (below.dialect, below.label, below.error) == (None, "passthrough", MESSAGES.error)
    assert PROTOCOLS.of("/v1/models", [(b"Anthropic-Version", b"2023-06-01")]).error == MESSAGES.error
    assert PROTOCOLS.of("/v1/models").error == error_response
    # A prefix no route has is no endpoint: nothing is repaired there.
    assert PROTOCOLS.of("/mistral/v1/messages").dialect is None
    assert [PROTOCOLS.of(path).label for path in ("/healthz", "/metrics", "/favicon.ico")] == ["healthz", "metrics", "other"]


@pytest.mark.parametrize("root", ["", "/claude"])
@pytest.mark.parametrize("path", ["/v1beta/models/gemini-3-pro-preview:generateContent", "/v1/models/gemini-2.5-pro:streamGenerateContent",
                                  "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent",
                                  "/v1beta1/publishers/google/models/gemini-2.5-flash:streamGenerateContent"])
def test_gemini_s_endpoints_are_its_by_their_path_also_under_a_route_prefix(root: str, path: str) -> None:
    protocol = PROTOCOLS.of(root + path)
    assert (protocol.dialect, protocol.label, protocol.error) == (GEMINI, "gemini", GEMINI.error)


def test_gemini_s_other_paths_pass_through_in_google_s_shape_and_openai_s_stay_openai_s() -> None:
    for path in ("/v1beta/models", "/v1beta/models/gemini-2.5-pro:countTokens", "/claude/v1beta/cachedContents/c1"):
        protocol = PROTOCOLS.of(path)
        assert (protocol.dialect, protocol.label, protocol.error) == (None, "passthrough", GEMINI.error), path
    for path in ("/v1/models", "/v1/models/gpt-4o", "/v1/embeddings"):
        assert (PROTOCOLS.of(path).label, PROTOCOLS.of(path).error) == ("passthrough", error_response), path
    # A model name is no prefix: the endpoint pattern counts only at the root or after a route's prefix.
    assert PROTOCOLS.of("/mistral/v1beta/models/g:generateContent").dialect is None


@pytest.mark.parametrize("path", ["/v1/messages", "/claude/v1/messages", "/claude/v1/messages/count_tokens"])
async def test_a_messages_client_gets_anthropic_s_502_counted_under_messages(path: str) -> None:
    settings = make_settings(routes=(RouteSpec(upstream=UPSTREAM, prefix="/claude"),))
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post(path.removeprefix("/claude").removeprefix("/v1")).mock(side_effect=httpx.ConnectError("refused"))
        async with running_proxy(settings) as proxy:
            answer = await proxy.client.post(path, json={"model": "claude-x", "max_tokens": 8, "messages": []}, headers=ANTHROPIC)
            metrics = (await proxy.client.get("/metrics")).text
    assert answer.status_code == 502
    assert answer.json() == {"type": "error", "error": {"type": "api_error", "message": answer.json()["error"]["message"]}}
    assert 'toolmend_requests_total{route="messages",status="502"} 1.0' in metrics


async def test_a_chat_client_gets_openai_s_502() -> None:
    with respx.mock(base_url=UPSTREAM) as upstream:
        upstream.post("/chat/completions").mock(side_effect=httpx.ConnectError("refused"))
        async with running_proxy(make_settings()) as proxy:
            answer = await proxy.client.post("/v1/chat/completions", json={"model": "m", "messages": []}, headers=AUTH)
    assert answer.status_code == 502 and set(answer.json()["error"]) == {"message", "type", "param", "code"}


class _PathModels(ChatDialect):
    """A dialect whose endpoints name the model in the path, as Gemini's do."""

    path = "/models"  # below which nothing is repaired: its endpoints are the pattern's
    path_pattern = re.compile(r"/v1beta/models/[^/]+:(?:stream)?[gG]enerateContent")

    @property
    def paths(self) -> tuple[str, ...]:
        return ()


def test_a_dialect_whose_paths_carry_the_model_claims_them_by_its_pattern_also_under_a_route_prefix() -> None:
    patterned = _PathModels()
    protocols = Protocols((CHAT, patterned), ["/g"])
    for path in ("/v1beta/models/gemini-2.0-flash:generateContent", "/g/v1beta/models/m:streamGenerateContent"):
        assert protocols.of(path).dialect is patterned
    assert protocols.of("/elsewhere/v1beta/models/m:generateContent").dialect is None
    assert protocols.of("/v1/chat/completions").dialect is CHAT


def test_the_list_dialects_read_the_model_and_the_stream_flag_off_the_body() -> None:
    facts = CHAT.facts(b"/v1/chat/completions", {"model": "m", "stream": True, "messages": []})
    assert (facts.target, facts.model, facts.streams) == (b"/v1/chat/completions", "m", True)
    assert MESSAGES.facts(b"/v1/messages", {"stream": "yes"}).streams is False
