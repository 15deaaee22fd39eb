"""End to end: the official openai client -> toolmend under uvicorn -> the strict upstream, on loopback.

The headline scenario: an agent loop whose framework drops the assistant ``tool_calls`` from its history
(keeping the text and the tool replies). Without toolmend every second request is a 400 (OAI-1/S2);
through toolmend every request succeeds and the upstream receives each call exactly as it emitted it.
"""

import httpx
import openai
import orjson
import pytest

from tests.support.client_tls import TLS
from tests.support.strict_upstream import Recorder

TOOLS = [
    {"type": "function", "function": {"name": "weather", "description": "Weather for a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "time", "description": "Local time in a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
]
TURNS = 3


def forgetful_history_step(history: list[dict], content: str | None, calls: list[dict]) -> None:
    """What a forgetful framework stores after a tool-call answer: text kept, tool_calls dropped, results kept."""
    if content:
        history.append({"role": "assistant", "content": content})
    for call in calls:
        history.append({"role": "tool", "tool_call_id": call["id"], "content": f"{call['function']['name']}: ok"})


def assert_calls_arrived_exactly(recorder: Recorder) -> None:
    """Every call the upstream emitted is in the last request it received, byte for byte, in order."""
    last = recorder.last.json["messages"]
    sent_turns = [m["tool_calls"] for m in last if m.get("role") == "assistant" and m.get("tool_calls")]
    assert sent_turns == recorder.emitted_turns
    raw = recorder.last.body_bytes
    for call in recorder.emitted_calls:
        assert orjson.dumps(call["function"]["arguments"]) in raw  # the argument text, not a re-encoding of it


def calls_of(message) -> list[dict]:
    return [call.model_dump(exclude_none=True) for call in (message.tool_calls or [])]


@pytest.mark.parametrize("parallel", [1, 3])
def test_forgetful_agent_loop_sync(proxy_url: str, recorder: Recorder, parallel: int) -> None:
    client = openai.OpenAI(base_url=proxy_url + "/v1", api_key="sk-tenant-sync", default_headers={"x-test-parallel-calls": str(parallel)})
    history: list[dict] = [{"role": "system", "content": "You are terse."}]
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"Question {turn}"})
        answer = client.chat.completions.create(model="gpt-strict-test", messages=history, tools=TOOLS)
        calls = calls_of(answer.choices[0].message)
        assert len(calls) == parallel
        forgetful_history_step(history, answer.choices[0].message.content, calls)
        final = client.chat.completions.with_raw_response.create(model="gpt-strict-test", messages=history, tools=TOOLS)
        # The history keeps every earlier turn's orphans too: one re-insertion per turn so far, whatever its width.
        assert final.headers["x-toolmend-repairs"] == f"TM101={turn + 1}"
        assert final.parse().choices[0].message.content.startswith(f"Received {parallel} tool result")
        assert_calls_arrived_exactly(recorder)
        history.append({"role": "assistant", "content": final.parse().choices[0].message.content})
    assert recorder.rejections == []


def stream_turn(client: openai.OpenAI, history: list[dict]) -> tuple[str, list[dict]]:
    calls: dict[int, dict] = {}
    text = ""
    with client.chat.completions.create(model="gpt-strict-test", messages=history, tools=TOOLS, stream=True,
                                        stream_options={"include_usage": True}) as stream:
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for delta in choice.delta.tool_calls or []:
                    call = calls.setdefault(delta.index, {"id": delta.id, "type": "function", "function": {"name": "", "arguments": ""}})
                    call["function"]["name"] += (delta.function.name or "") if delta.id else ""
                    call["function"]["arguments"] += delta.function.arguments or ""
    return text, [calls[i] for i in sorted(calls)]


def test_forgetful_agent_loop_streaming(proxy_url: str, recorder: Recorder) -> None:
    client = openai.OpenAI(base_url=proxy_url + "/v1", api_key="sk-tenant-stream")
    history: list[dict] = [{"role": "user", "content": "Go"}]
    for turn in range(TURNS):
        text, calls = stream_turn(client, history)
        assert len(calls) == 2 and calls == recorder.emitted_turns[-1]
        forgetful_history_step(history, text, calls)
        text, calls = stream_turn(client, history)
        assert text == "Received 2 tool results." and calls == []
        assert_calls_arrived_exactly(recorder)
        history += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Again {turn}"}]
    assert recorder.rejections == []


async def test_forgetful_agent_loop_async(proxy_url: str, recorder: Recorder) -> None:
    async with openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="sk-tenant-async") as client:
        history: list[dict] = [{"role": "user", "content": "Go"}]
        for turn in range(TURNS):
            answer = await client.chat.completions.create(model="gpt-strict-test", messages=history, tools=TOOLS)
            forgetful_history_step(history, None, calls_of(answer.choices[0].message))
            stream = await client.chat.completions.create(model="gpt-strict-test", messages=history, tools=TOOLS, stream=True)
            text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
            assert text == "Received 2 tool results."
            assert_calls_arrived_exactly(recorder)
            history += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Again {turn}"}]
    assert recorder.rejections == []


def test_valid_history_arrives_byte_identical(proxy_url: str, recorder: Recorder) -> None:
    body = (
        b'{"model": "gpt-strict-test",  "messages": [\n {"role": "user", "content": "caf\\u00e9 \xe2\x98\x95"},'
        b' {"role": "assistant", "content": null, "tool_calls": [{"id": "call_a", "type": "function",'
        b' "function": {"name": "weather", "arguments": "{ \\"city\\" : \\"Paris\\" }"}}]},'
        b' {"role": "tool", "tool_call_id": "call_a", "content": "18C"}], "temperature": 1.0}'
    )
    answer = httpx.post(proxy_url + "/v1/chat/completions", content=body,
                        headers={"content-type": "application/json", "authorization": "Bearer sk-valid"}, verify=TLS)
    assert answer.status_code == 200
    assert "x-toolmend-repairs" not in answer.headers
    assert recorder.last.body_bytes == body


def test_second_tenant_cannot_recall_first_tenants_calls(proxy_url: str, recorder: Recorder) -> None:
    first = openai.OpenAI(base_url=proxy_url + "/v1", api_key="sk-tenant-one")
    answer = first.chat.completions.create(model="gpt-strict-test", messages=[{"role": "user", "content": "Go"}], tools=TOOLS)
    emitted = calls_of(answer.choices[0].message)
    replay = [{"role": "user", "content": "Go"}] + [
        {"role": "tool", "tool_call_id": call["id"], "content": "stolen?"} for call in emitted
    ]
    second = openai.OpenAI(base_url=proxy_url + "/v1", api_key="sk-tenant-two")
    second.chat.completions.create(model="gpt-strict-test", messages=replay, tools=TOOLS)
    sent = recorder.last.json["messages"][1]["tool_calls"]
    assert [call["id"] for call in sent] == [call["id"] for call in emitted]
    assert all(call["function"]["arguments"] == "{}" for call in sent)  # synthesized, not tenant one's
    assert all(orjson.dumps(call["function"]["arguments"]) not in recorder.last.body_bytes for call in emitted)
