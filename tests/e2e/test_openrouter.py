"""toolmend in front of OpenRouter serving a Gemini 3 model, through real uvicorn with the official openai client.

The scripted upstream plays OpenRouter: its tool-call answers carry ``reasoning_details`` (the thought signature in
the ``reasoning.encrypted`` entry), and it refuses a current-turn replay of those calls without them (GE-8), as
OpenRouter does. A framework that keeps only ``content`` and ``tool_calls`` (what the openai types declare) gets the
list back from memory, JSON and streamed; one that keeps it arrives byte-identical.
"""

from collections.abc import Iterator

import httpx
import openai
import orjson
import pytest

from proxy.app import create_app
from proxy.config import Settings
from tests.support.client_tls import TLS
from tests.support.strict_upstream import Recorder, make_strict_upstream, serve

MODEL = "google/gemini-3-pro-preview"
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}]
USER = {"role": "user", "content": "Weather in Paris and Tokyo?"}


@pytest.fixture(scope="module")
def rig() -> Iterator[tuple[str, str, Recorder]]:
    app, recorder = make_strict_upstream(provider="openrouter", seed=7)
    with serve(app) as upstream, serve(create_app(Settings(upstream=upstream + "/v1", profile="openrouter"))) as proxy:
        yield upstream, proxy, recorder


def first_turn(client: openai.OpenAI, stream: bool) -> list[dict]:
    """The calls of the model's first answer, as a framework keeps them: ids, names, arguments, nothing else."""
    if not stream:
        message = client.chat.completions.create(model=MODEL, messages=[USER], tools=TOOLS).choices[0].message
        return [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for c in message.tool_calls or []]
    calls: dict[int, dict] = {}
    with client.chat.completions.create(model=MODEL, messages=[USER], tools=TOOLS, stream=True) as chunks:
        for chunk in chunks:
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls.setdefault(delta.index, {"id": delta.id, "type": "function",
                                                       "function": {"name": delta.function.name, "arguments": ""}})
                entry["function"]["arguments"] += delta.function.arguments or ""
    return [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_loop_that_drops_reasoning_details_gets_them_back(rig: tuple[str, str, Recorder], stream: bool) -> None:
    upstream, proxy, recorder = rig
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="sk-or-test")
    kept = first_turn(client, stream)
    emitted = recorder.responses[-1]["reasoning_details"]
    assert len(kept) == 2 and emitted[-1]["type"] == "reasoning.encrypted"
    history = [USER, {"role": "assistant", "content": None, "tool_calls": kept},
               *[{"role": "tool", "tool_call_id": c["id"], "content": "18C"} for c in kept]]
    refused = httpx.post(upstream + "/v1/chat/completions", json={"model": MODEL, "messages": history, "tools": TOOLS}, verify=TLS)
    assert refused.status_code == 400
    assert refused.json()["error"]["metadata"]["raw"].startswith("Gemini models require OpenRouter reasoning details")
    answer = client.chat.completions.with_raw_response.create(model=MODEL, messages=history, tools=TOOLS)  # type: ignore[arg-type]
    assert answer.http_response.status_code == 200
    assert "TM312" in answer.http_response.headers["x-toolmend-repairs"]
    sent = recorder.last.json["messages"][1]
    assert orjson.dumps(sent["reasoning_details"]) == orjson.dumps(emitted)  # whole, in order, byte for byte


def test_a_loop_that_keeps_them_arrives_byte_identical(rig: tuple[str, str, Recorder]) -> None:
    _, proxy, recorder = rig
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="sk-or-test")
    message = client.chat.completions.create(model=MODEL, messages=[USER], tools=TOOLS).choices[0].message
    assistant = {"role": "assistant", "content": message.content, "tool_calls": [c.model_dump() for c in message.tool_calls or []],
                 "reasoning_details": (message.model_extra or {})["reasoning_details"]}
    history = [USER, assistant, *[{"role": "tool", "tool_call_id": c["id"], "content": "18C"} for c in assistant["tool_calls"]]]
    body = orjson.dumps({"model": MODEL, "messages": history, "tools": TOOLS})
    answer = httpx.post(proxy + "/v1/chat/completions", content=body,
                        headers={"content-type": "application/json", "authorization": "Bearer sk-or-test"}, verify=TLS)
    assert answer.status_code == 200 and "x-toolmend-repairs" not in answer.headers, answer.text
    assert recorder.last.body_bytes == body
