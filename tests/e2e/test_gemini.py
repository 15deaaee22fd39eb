"""End to end on Gemini's native API: the official ``google-genai`` client (automatic function calling off) -> toolmend
under uvicorn -> the scripted strict Gemini upstream (``tests/support/gemini_upstream.py``: GN-1, GN-2, GN-11, GN-12
with Google's texts), all on loopback, the client's base URL toolmend's address as users set it.

* A clean agent loop (``generate_content`` and ``generate_content_stream``, Gemini 2.5 and 3, ``v1`` and ``v1beta``)
  reaches the upstream as the client's own bytes, every request.
* A loop that drops its model contents, one that sends each function response in its own content, and one that strips
  the thought signatures are each accepted: the upstream gets back the model contents it emitted, every part, the
  signature on the part it came on.
* The JSON-array stream (``streamGenerateContent`` without ``alt=sse``) goes out as it arrives and is remembered.
* Vertex AI's paths (express and project) and a route prefix are served; ``countTokens`` and the model list pass
  through untouched; toolmend's own errors come in Google's envelope.
* Keys in ``x-goog-api-key``, ``?key=`` and ``Authorization: Bearer`` go upstream as sent, scope memory per key, and
  ``?key=`` reaches no log line and no metric.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from proxy.app import create_app
from proxy.config import Settings
from proxy.routes import RouteSpec
from tests.support.client_tls import TLS
from tests.support.gemini_upstream import GeminiRecorder, decoded, make_gemini_upstream
from tests.support.lazy import lazy
from tests.support.strict_upstream import serve

genai = lazy("google.genai")

MODELS = ("gemini-2.5-flash", "gemini-3-pro-preview")


# The tool the agent loop declares, and its config: made on first use, as google-genai is imported then.
@functools.cache
def weather() -> genai.types.Tool:
    return genai.types.Tool(function_declarations=[genai.types.FunctionDeclaration(
        name="get_weather", description="The weather in a city.",
        parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}})])


@functools.cache
def config() -> genai.types.GenerateContentConfig:
    return genai.types.GenerateContentConfig(tools=[weather()], automatic_function_calling=genai.types.AutomaticFunctionCallingConfig(disable=True))


#: How the agent loop keeps its history: as the API asks, or broken as clients are seen to break it.
MODES = ("clean", "drop", "split", "strip")


@pytest.fixture(scope="module")
def gemini() -> Iterator[tuple[str, GeminiRecorder]]:
    app, recorder = make_gemini_upstream()
    with serve(app) as url:
        yield url, recorder


@pytest.fixture
def recorder(gemini: tuple[str, GeminiRecorder]) -> GeminiRecorder:
    gemini[1].reset()
    return gemini[1]


@pytest.fixture(scope="module")
def proxy(gemini: tuple[str, GeminiRecorder]) -> Iterator[str]:
    routes = (RouteSpec(upstream=gemini[0], prefix="/google"),)
    with serve(create_app(Settings(upstream=gemini[0], memory="memory://", routes=routes))) as url:
        yield url


def client(base_url: str, sent: list[bytes] | None = None, api_version: str = "v1beta", key: str = "key-one") -> genai.Client:
    hooks = {"request": [lambda request: sent.append(request.read())]} if sent is not None else {}
    options = genai.types.HttpOptions(base_url=base_url, api_version=api_version, httpx_client=httpx.Client(event_hooks=hooks, verify=TLS),
                                async_client_args={"verify": TLS})
    return genai.Client(api_key=key, http_options=options)


def ask(model_client: genai.Client, model: str, history: list[genai.types.Content], stream: bool) -> genai.types.Content:
    """The model content of one answer; a streamed one as a client keeps it: every part of every chunk, in order."""
    if not stream:
        answer = model_client.models.generate_content(model=model, contents=history, config=config())
        content = answer.candidates[0].content
        assert content is not None
        return content
    parts = [part for chunk in model_client.models.generate_content_stream(model=model, contents=history, config=config())
             for part in (chunk.candidates[0].content.parts or ())]
    return genai.types.Content(role="model", parts=parts)


def agent_loop(model_client: genai.Client, model: str, mode: str, stream: bool, turns: int = 2) -> None:
    """Asks for the weather ``turns`` times, answering every call, keeping its history as ``mode`` says."""
    history: list[genai.types.Content] = []
    for turn in range(turns):
        history.append(genai.types.Content(role="user", parts=[genai.types.Part(text=f"Weather, round {turn}?")]))
        called = ask(model_client, model, history, stream)
        calls = [part.function_call for part in called.parts or () if part.function_call]
        assert calls, called
        if mode == "strip":
            history.append(genai.types.Content(role="model", parts=[part.model_copy(update={"thought_signature": None})
                                                              for part in called.parts or ()]))
        elif mode != "drop":
            history.append(called)
        responses = [genai.types.Part(function_response=genai.types.FunctionResponse(id=call.id, name=call.name, response={"temperature": 18}))
                     for call in calls]
        if mode == "split":
            history.extend(genai.types.Content(role="user", parts=[response]) for response in responses)
        else:
            history.append(genai.types.Content(role="user", parts=responses))
        history.append(ask(model_client, model, history, stream))


def sent_model_contents(recorder: GeminiRecorder) -> list[dict[str, Any]]:
    """Every model content with a call the upstream was sent, in the order of the requests."""
    return [content for request in recorder.requests for content in request.json["contents"]
            if content.get("role") == "model" and any("functionCall" in part for part in content["parts"])]


def signatures(parts: list[dict[str, Any]]) -> list[bytes | None]:
    return [decoded(part.get("thoughtSignature")) for part in parts]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("api_version", ["v1beta", "v1"])
def test_a_clean_loop_arrives_as_the_clients_bytes(proxy, recorder, model, stream, api_version):
    sent: list[bytes] = []
    agent_loop(client(proxy, sent, api_version), model, "clean", stream)
    assert recorder.rejections == []
    assert [request.body_bytes for request in recorder.requests] == sent
    assert all(request.path.startswith(f"/{api_version}/models/{model}:") for request in recorder.requests)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("mode", MODES[1:])
def test_a_broken_loop_is_repaired_from_memory(proxy, recorder, mode, model, stream):
    agent_loop(client(proxy, key=f"key-{mode}-{model}-{stream}"), model, mode, stream)
    assert recorder.rejections == []
    emitted = [content for content in recorder.emitted if any("functionCall" in part for part in content["parts"])]
    returned = sent_model_contents(recorder)
    # Each call turn goes back once per request after it: the latest request carries them all.
    latest = returned[-len(emitted):]
    for got, made in zip(latest, emitted, strict=True):
        assert [{k: v for k, v in part.items() if k != "thoughtSignature"} for part in got["parts"]] == \
            [{k: v for k, v in part.items() if k != "thoughtSignature"} for part in made["parts"]]
        # A stripped signature comes back where Gemini checks it: on the current turn's calls (GN-11).
        if mode != "strip" or got is latest[-1]:
            assert signatures(got["parts"]) == signatures(made["parts"])


def test_the_json_array_stream_goes_out_as_it_arrives_and_is_remembered(proxy, gemini):
    """The upstream holds the array's end back until the client has read its start through toolmend: a relay that
    buffered the answer would never pass the start on (the upstream gives up after 10 s and the test fails)."""
    app, recorder = make_gemini_upstream()
    release = threading.Event()
    started: list[bytes] = []
    with serve(app) as url, serve(create_app(Settings(upstream=url, memory="memory://"))) as toolmend:
        recorder.hold = release
        body = {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}], "tools": [weather().model_dump(exclude_none=True, by_alias=True)]}
        path = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent"
        with httpx.stream("POST", toolmend + path, json=body, headers={"x-goog-api-key": "k"}, timeout=30, verify=TLS) as answer:
            chunks = answer.iter_raw()
            started.append(next(chunks))
            release.set()
            rest = b"".join(chunks)
        assert not recorder.gave_up_holding, "the client read nothing until the upstream sent the array's end"
        streamed = orjson.loads(started[0] + rest)
        parts = [part for chunk in streamed for part in chunk["candidates"][0]["content"]["parts"]]
        # The history comes back without its model content: the remembered one is put back as emitted.
        body["contents"] += [{"role": "user", "parts": [{"functionResponse": {"id": call["functionCall"]["id"], "name": "get_weather",
                                                                            "response": {"t": 18}}}
                                                       for call in parts if "functionCall" in call]}]
        again = httpx.post(toolmend + path.replace("streamGenerateContent", "generateContent"), json=body,
                           headers={"x-goog-api-key": "k"}, verify=TLS)
        assert again.status_code == 200, again.text
        assert recorder.requests[-1].json["contents"][1] == {"role": "model", "parts": parts}


def test_vertex_paths_and_a_route_prefix_are_served(proxy, recorder):
    express = genai.Client(vertexai=True, api_key="vertex-key", http_options=genai.types.HttpOptions(base_url=proxy + "/google"))
    answer = express.models.generate_content(model="gemini-2.5-flash", contents="Weather?", config=config())
    assert answer.function_calls
    assert recorder.requests[-1].path == "/v1beta1/publishers/google/models/gemini-2.5-flash:generateContent"
    answer = httpx.post(proxy + "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent",
                        json={"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]},
                        headers={"authorization": "Bearer ya29.token"}, verify=TLS)
    assert answer.status_code == 200
    assert recorder.requests[-1].headers["authorization"] == "Bearer ya29.token"
    assert "id" not in recorder.emitted[-1]["parts"][1]["functionCall"]  # Vertex's answer: no ids


def test_other_gemini_paths_pass_through_untouched(proxy, recorder):
    orphan = b'{"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]}'
    with httpx.Client(base_url=proxy) as http:
        counted = http.post("/v1beta/models/gemini-2.5-flash:countTokens?key=abc", content=orphan)
        listed = http.get("/v1beta/models?pageSize=5", headers={"x-goog-api-key": "abc"})
        cached = http.post("/v1beta/cachedContents", content=orphan, headers={"x-goog-api-key": "abc"})
    assert [answer.status_code for answer in (counted, listed, cached)] == [200, 200, 200]
    assert [(request.path, request.body_bytes) for request in recorder.requests] == [
        ("/v1beta/models/gemini-2.5-flash:countTokens?key=abc", orphan), ("/v1beta/models?pageSize=5", b""),
        ("/v1beta/cachedContents", orphan)]
    assert "x-toolmend-repairs" not in counted.headers


def test_toolmends_own_errors_are_in_googles_envelope(proxy, recorder):
    answer = httpx.post(proxy + "/v1beta/models/gemini-2.5-flash:generateContent", content=b"{not json",
                        headers={"x-goog-api-key": "k"}, verify=TLS)
    assert answer.status_code == 400
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT" and answer.json()["error"]["code"] == 400
    # A client cannot take the request out of the upstream's path: refused in Google's envelope, never forwarded.
    escaped = httpx.post(proxy + "/v1beta/models/%2e%2e%2f%2e%2e%2fother:generateContent", json={"contents": []}, verify=TLS)
    assert escaped.status_code == 400 and escaped.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert recorder.requests == []
    # The SDK reads it as it reads Google's own.
    with pytest.raises(genai.errors.ClientError) as refused:
        client(proxy, api_version="v1beta/models/%2e%2e").models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert (refused.value.code, refused.value.status) == (400, "INVALID_ARGUMENT")


def test_keys_go_upstream_as_sent_and_never_into_logs_or_metrics(proxy, recorder, caplog):
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]}
    with caplog.at_level(logging.DEBUG):
        httpx.post(proxy + path + "?key=AIzaSecretInQuery", json=body, verify=TLS)
        httpx.post(proxy + path, json=body, headers={"x-goog-api-key": "AIzaSecretInHeader"}, verify=TLS)
        httpx.post(proxy + path, json=body, headers={"authorization": "Bearer ya29.SecretToken"}, verify=TLS)
    got = recorder.requests
    assert got[0].path.endswith("?key=AIzaSecretInQuery")
    assert got[1].headers["x-goog-api-key"] == "AIzaSecretInHeader"
    assert got[2].headers["authorization"] == "Bearer ya29.SecretToken"
    metrics = httpx.get(proxy + "/metrics", verify=TLS).text
    logged = repr([record.__dict__ for record in caplog.records if record.name.startswith("toolmend")])
    for secret in ("AIzaSecretInQuery", "AIzaSecretInHeader", "SecretToken"):
        assert secret not in logged and secret not in metrics
    assert 'route="gemini"' in metrics


def foreign_history(signed_parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A history whose first call content carries a signature this upstream never minted, then ``signed_parts`` (a
    call content as the upstream emitted it) with its responses."""
    foreign = {"role": "model", "parts": [{"functionCall": {"id": "old-1", "name": "get_weather", "args": {"city": "Oslo"}},
                                           "thoughtSignature": "Zm9yZWlnbi1zaWduYXR1cmU="}]}
    answered = [{"functionResponse": {"id": part["functionCall"].get("id"), "name": "get_weather", "response": {"t": 18}}}
                for part in signed_parts if "functionCall" in part]
    return {"contents": [{"role": "user", "parts": [{"text": "Weather in Oslo?"}]}, foreign,
                         {"role": "user", "parts": [{"functionResponse": {"id": "old-1", "name": "get_weather", "response": {"t": 3}}}]},
                         {"role": "user", "parts": [{"text": "And in Paris and Tokyo?"}]},
                         {"role": "model", "parts": signed_parts}, {"role": "user", "parts": answered}]}


def test_a_refused_signature_is_left_out_and_the_request_sent_once_more(proxy, recorder):
    """GN-12: the upstream refuses a signature it did not mint; toolmend sends the request again without it (TM612),
    keeping the signature it remembers this tenant's upstream minted, and leaves it out of the tenant's later requests
    before they are sent."""
    path, key = "/v1beta/models/gemini-3-pro-preview:generateContent", {"x-goog-api-key": "key-gn12"}
    first = httpx.post(proxy + path, json={"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]}, headers=key, verify=TLS)
    signed = first.json()["candidates"][0]["content"]["parts"]
    body = foreign_history(signed)
    answer = httpx.post(proxy + path, json=body, headers=key, verify=TLS)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-toolmend-repairs"] == "TM612=1"
    refused, retried = recorder.requests[-2:]
    assert recorder.rejections == [{"message": "Corrupted thought signature."}]
    assert refused.json == body
    assert retried.json["contents"][1]["parts"] == [{"functionCall": {"id": "old-1", "name": "get_weather", "args": {"city": "Oslo"}}}]
    assert retried.json["contents"][4]["parts"] == signed  # minted for this tenant: kept
    # The session goes on: the refused signature is left out before the request is sent, no refusal paid again.
    again = httpx.post(proxy + path, json=body, headers=key, verify=TLS)
    assert again.status_code == 200 and again.headers["x-toolmend-repairs"] == "TM612=1"
    assert len(recorder.rejections) == 1 and recorder.requests[-1].json == retried.json


def test_under_thinking_policy_reject_the_refusal_reaches_the_client(gemini, recorder):
    with serve(create_app(Settings(upstream=gemini[0], memory="memory://", thinking_policy="reject"))) as strict:
        answer = httpx.post(strict + "/v1beta/models/gemini-2.5-flash:generateContent", json=foreign_history([]), verify=TLS)
    assert answer.status_code == 400
    assert answer.json() == {"error": {"code": 400, "message": "Corrupted thought signature.", "status": "INVALID_ARGUMENT"}}
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("carrier", ["x-goog-api-key", "key", "authorization"])
def test_a_route_with_the_operators_key_puts_it_where_the_client_put_its_own(gemini, recorder, carrier):
    """A Gemini client presents a toolmend key as its API key (``x-goog-api-key``, ``?key=``) or as a bearer token; the
    upstream gets the operator's key in that carrier and never the client's."""
    settings = Settings(upstream=gemini[0], memory="memory://", upstream_api_key="AIzaOperator", api_keys=frozenset({"team-key"}))
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    if carrier == "key":
        sent = {"params": {"key": "team-key", "alt": "json"}}
    else:
        sent = {"headers": {carrier: "Bearer team-key" if carrier == "authorization" else "team-key"}}
    with serve(create_app(settings)) as toolmend:
        answer = httpx.post(toolmend + path, json={"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}, **sent, verify=TLS)
        refused = httpx.post(toolmend + path + "?key=wrong", json={"contents": []}, verify=TLS)
    assert answer.status_code == 200, answer.text
    got = recorder.requests[0]
    if carrier == "key":
        assert got.path == path + "?alt=json&key=AIzaOperator"
        assert "x-goog-api-key" not in got.headers and "authorization" not in got.headers
    else:
        assert got.headers[carrier] == ("Bearer AIzaOperator" if carrier == "authorization" else "AIzaOperator")
        assert got.path == path
    assert "team-key" not in repr(got)
    assert refused.status_code == 401 and refused.json()["error"]["status"] == "UNAUTHENTICATED"
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("other", [{"headers": {"x-goog-api-key": "key-b"}}, {"params": {"key": "key-b"}},
                                   {"headers": {"authorization": "Bearer key-b"}}])
def test_memory_is_kept_per_key_whatever_its_carrier(proxy, recorder, other):
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    ask_a = {"params": {"key": "key-a"}}
    first = httpx.post(proxy + path, json={"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]}, **ask_a, verify=TLS).json()
    calls = [part["functionCall"] for part in first["candidates"][0]["content"]["parts"] if "functionCall" in part]
    dropped = {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]},
                            {"role": "user", "parts": [{"functionResponse": {"id": call["id"], "name": call["name"], "response": {}}}
                                                       for call in calls]}]}
    mine = httpx.post(proxy + path, json=dropped, **ask_a, verify=TLS)
    theirs = httpx.post(proxy + path, json=dropped, **other, verify=TLS)
    assert mine.headers["x-toolmend-calls"] == "recalled=2,synthesized=0"
    assert "recalled=0" in theirs.headers.get("x-toolmend-calls", "recalled=0")
