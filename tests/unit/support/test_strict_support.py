"""Tests of the strict-provider test support: the validator (rule by rule) and the strict upstream over uvicorn.

Rule ids and texts: docs/provider-rules.md (sections 1.1, 3.1, 4).
"""

from __future__ import annotations

import json
import re

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.client_tls import TLS
from tests.support.hypothesis_budget import examples
from tests.support.served import served_fixtures
from tests.support.strict_upstream import make_strict_upstream, serve
from tests.support.strict_validator import Violation, first_error, violations

# --------------------------------------------------------------------------------------------------
# history builders
# --------------------------------------------------------------------------------------------------


def user(text: str = "hi") -> dict:
    return {"role": "user", "content": text}


def system(text: str = "be brief") -> dict:
    return {"role": "system", "content": text}


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Paris"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def asst_calls(*ids: str, content: str | None = None) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": [call(i) for i in ids]}


def asst(text: str = "done") -> dict:
    return {"role": "assistant", "content": text}


def tool(call_id: str, text: str = "sunny") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def body(*messages: dict) -> dict:
    return {"model": "gpt-strict-test", "messages": list(messages)}


ORPHAN = ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
          "'tool_calls'.")
UNANSWERED = ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
              "'tool_call_id'. The following tool_call_ids did not have response messages: ")
NULL_CONTENT = "Invalid value for 'content': expected a string, got null."
ID_41 = "call_" + "x" * 36

# --------------------------------------------------------------------------------------------------
# valid histories
# --------------------------------------------------------------------------------------------------

VALID = {
    "plain chat": body(system(), user(), asst("hello"), user("more")),
    "developer role": body({"role": "developer", "content": "rules"}, user()),
    "one tool round": body(user(), asst_calls("call_a"), tool("call_a"), asst("it is sunny")),
    "parallel calls": body(user(), asst_calls("call_a", "call_b", "call_c"),
                           tool("call_a"), tool("call_b"), tool("call_c"), asst()),
    "results in any order (OAI-13)": body(user(), asst_calls("call_a", "call_b"), tool("call_b"), tool("call_a")),
    "several rounds": body(system(), user(), asst_calls("call_a"), tool("call_a"), asst_calls("call_b", "call_c"),
                           tool("call_b"), tool("call_c"), asst(), user("again"), asst_calls("call_d"),
                           tool("call_d")),
    "text + tool_calls": body(user(), asst_calls("call_a", content="Let me check."), tool("call_a")),
    "content null with tool_calls": body(user(), asst_calls("call_a", content=None), tool("call_a")),
    "content '' with tool_calls (OAI-12)": body(user(), asst_calls("call_a", content=""), tool("call_a")),
    "content key omitted with tool_calls": body(
        user(), {"role": "assistant", "tool_calls": [call("call_a")]}, tool("call_a")),
    "tool content empty string": body(user(), asst_calls("call_a"), tool("call_a", "")),
    "user image parts": body({"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}),
    "assistant text parts": body(user(), {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}),
    "id of 40 chars": body(user(), asst_calls("c" * 40), tool("c" * 40)),
    "tool_calls null": body(user(), {"role": "assistant", "content": "x", "tool_calls": None}),
    "unknown fields kept (S13)": body(user(), dict(asst_calls("call_a"), reasoning_content="hmm"),
                                      dict(tool("call_a"), name="get_weather")),
    "arguments {}": body(user(), {"role": "assistant", "content": None,
                                  "tool_calls": [call("call_a", arguments="{}")]}, tool("call_a")),
}


@pytest.mark.parametrize("history", VALID.values(), ids=VALID.keys())
def test_valid_histories_are_accepted(history):
    assert violations(history) == []
    assert first_error(history) is None


# --------------------------------------------------------------------------------------------------
# rejected histories: (rule, exact text, param, index)
# --------------------------------------------------------------------------------------------------


def _calls_with(**fields) -> dict:
    """A user turn then an assistant whose single call has ``fields`` replaced (None value = key removed)."""
    entry = call("call_a")
    function = dict(entry["function"])
    for key, value in fields.items():
        target = function if key in ("name", "arguments") else entry
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    entry["function"] = function
    return body(user(), {"role": "assistant", "content": None, "tool_calls": [entry]}, tool("call_a"))


REJECTED = {
    # BASE (section 0)
    "body not an object": ([], "BASE", "Invalid type for 'body': expected an object, but got an array instead.",
                           "body", None),
    "messages missing": ({"model": "m"}, "BASE", "Missing required parameter: 'messages'.", "messages", None),
    "messages empty": (body(), "BASE", "Invalid 'messages': empty array. Expected an array with minimum length 1, "
                       "but got an empty array instead.", "messages", None),
    "message not an object": (body(user(), "hi"), "BASE",
                              "Invalid type for 'messages[1]': expected an object, but got a string instead.",
                              "messages[1]", 1),
    "role missing": (body({"content": "x"}), "BASE", "Missing required parameter: 'messages[0].role'.",
                     "messages[0].role", 0),
    "unknown role": (body({"role": "model", "content": "x"}), "BASE",
                     "Invalid value: 'model'. Supported values are: 'system', 'assistant', 'user', 'function', "
                     "'tool', and 'developer'.", "messages[0].role", 0),
    # OAI-11 / S11
    "role function": (body(user(), {"role": "function", "name": "f", "content": "x"}), "OAI-11",
                      "Unsupported value: 'messages[1].role' does not support 'function' with this model.",
                      "messages[1].role", 1),
    "function_call on user": (body({"role": "user", "content": "x", "function_call": {"name": "f"}}), "OAI-11",
                              "Invalid parameter: only messages with role 'assistant' can have a function call.",
                              "messages[0].function_call", 0),
    "function_call on assistant": (body(user(), {"role": "assistant", "content": None,
                                                 "function_call": {"name": "f", "arguments": "{}"}}), "S11",
                                   "Unsupported parameter: 'messages[1].function_call' is not supported with this "
                                   "model.", "messages[1].function_call", 1),
    # OAI-1 / S2
    "tool message first": (body(tool("call_a"), user()), "OAI-1", ORPHAN, "messages.[0].role", 0),
    "tool after user": (body(user(), tool("call_a")), "OAI-1", ORPHAN, "messages.[1].role", 1),
    "tool after system": (body(system(), tool("call_a")), "OAI-1", ORPHAN, "messages.[1].role", 1),
    "tool after plain assistant": (body(user(), asst(), tool("call_a")), "OAI-1", ORPHAN, "messages.[2].role", 2),
    "tool after block closed by user": (body(user(), asst_calls("call_a"), tool("call_a"), user(), tool("call_a")),
                                        "OAI-1", ORPHAN, "messages.[4].role", 4),
    # OAI-2 / S1 / S3
    "assistant with calls is last": (body(user(), asst_calls("call_a", "call_b")), "OAI-2",
                                     UNANSWERED + "call_a, call_b", "messages.[1].role", 1),
    "one of two unanswered": (body(user(), asst_calls("call_a", "call_b"), tool("call_b"), asst()), "OAI-2",
                              UNANSWERED + "call_a", "messages.[1].role", 1),
    "user between call and result": (body(user(), asst_calls("call_a"), user("wait"), tool("call_a")), "OAI-2",
                                     UNANSWERED + "call_a", "messages.[1].role", 1),
    # OAI-3
    "tool_call_id missing": (body(user(), asst_calls("call_a"), {"role": "tool", "content": "x"}), "OAI-3",
                             "Missing parameter 'tool_call_id': messages with role 'tool' must have a "
                             "'tool_call_id'.", "messages.[2].tool_call_id", 2),
    # OAI-4 / S8
    "tool_calls empty": (body(user(), {"role": "assistant", "content": "x", "tool_calls": []}), "OAI-4",
                         "Invalid 'messages[1].tool_calls': empty array. Expected an array with minimum length 1, "
                         "but got an empty array instead.", "messages[1].tool_calls", 1),
    # OAI-5 / S6
    "type missing": (_calls_with(type=None), "OAI-5", "Missing required parameter: 'messages[1].tool_calls[0].type'.",
                     "messages[1].tool_calls[0].type", 1),
    "type not function": (_calls_with(type="custom"), "OAI-5", "Invalid value: 'custom'. Supported values are: "
                          "'function'.", "messages[1].tool_calls[0].type", 1),
    # OAI-6 / S6
    "arguments an object": (_calls_with(arguments={"city": "Paris"}), "OAI-6",
                            "Invalid type for 'messages[1].tool_calls[0].function.arguments': expected a string, "
                            "but got an object instead.", "messages[1].tool_calls[0].function.arguments", 1),
    "arguments missing": (_calls_with(arguments=None), "OAI-6", "Missing required parameter: "
                          "'messages[1].tool_calls[0].function.arguments'.",
                          "messages[1].tool_calls[0].function.arguments", 1),
    # OAI-7 / S6
    "name empty": (_calls_with(name=""), "OAI-7", "Invalid 'messages[1].tool_calls[0].function.name': empty string. "
                   "Expected a string with minimum length 1, but got an empty string instead.",
                   "messages[1].tool_calls[0].function.name", 1),
    "name missing": (_calls_with(name=None), "OAI-7",
                     "Missing required parameter: 'messages[1].tool_calls[0].function.name'.",
                     "messages[1].tool_calls[0].function.name", 1),
    # S6 / AN-5
    "id missing": (body(user(), {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}), "S6",
        "Missing required parameter: 'messages[1].tool_calls[0].id'.", "messages[1].tool_calls[0].id", 1),
    "id empty": (_calls_with(id=""), "S6", "Invalid 'messages[1].tool_calls[0].id': empty string. Expected a string "
                 "with minimum length 1, but got an empty string instead.", "messages[1].tool_calls[0].id", 1),
    # OAI-8 / E-ID-40
    "id of 41 chars": (body(user(), asst_calls(ID_41), tool(ID_41)), "OAI-8",
                       "Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with maximum "
                       "length 40, but got a string with length 41 instead.", "messages[1].tool_calls[0].id", 1),
    # S7
    "arguments truncated": (_calls_with(arguments='{"city": "Paris"'), "S7",
                            "Expecting ',' delimiter: line 1 column 17 (char 16)",
                            "messages[1].tool_calls[0].function.arguments", 1),
    "arguments unterminated string": (_calls_with(arguments='{"city": "Par'), "S7",
                                      "Unterminated string starting at: line 1 column 10 (char 9)",
                                      "messages[1].tool_calls[0].function.arguments", 1),
    "arguments empty string": (_calls_with(arguments=""), "S7",
                               "The arguments to a tool_call with ID 'call_a' are not a valid JSON string. Parsing "
                               'error: Error("EOF while parsing a value", line: 1, column: 0)',
                               "messages[1].tool_calls[0].function.arguments", 1),
    "arguments a JSON array": (_calls_with(arguments="[1, 2]"), "VL-2", "'list object' has no attribute 'items'",
                               "messages[1].tool_calls[0].function.arguments", 1),
    # S4
    "id reused by a later assistant": (body(user(), asst_calls("call_a"), tool("call_a"), user(),
                                            asst_calls("call_a"), tool("call_a")), "S4",
                                       "invalid params, duplicate tool_call id: call_a",
                                       "messages[4].tool_calls[0].id", 4),
    "id twice in one assistant": (body(user(), asst_calls("call_a", "call_a", content="hm"), tool("call_a")), "S4",
                                  "messages.1.content.2: tool_use ids must be unique",
                                  "messages[1].tool_calls[1].id", 1),
    # S5
    "two results for one id": (body(user(), asst_calls("call_a"), tool("call_a", "placeholder"), tool("call_a")),
                               "S5", "Duplicate tool call id call_a in tool results", "messages.[3].tool_call_id", 3),
    # OAI-9 / S10
    "null content on user": (body({"role": "user", "content": None}), "OAI-9", NULL_CONTENT,
                             "messages.[0].content", 0),
    "null content on tool": (body(user(), asst_calls("call_a"), dict(tool("call_a"), content=None)), "OAI-9",
                             NULL_CONTENT, "messages.[2].content", 2),
    "null content on plain assistant": (body(user(), {"role": "assistant", "content": None}), "OAI-9",
                                        NULL_CONTENT, "messages.[1].content", 1),
    "empty content on plain assistant": (body(user(), asst(""), user()), "S10",
                                         "messages: text content blocks must be non-empty", "messages.[1].content", 1),
    "[] content on plain assistant": (body(user(), {"role": "assistant", "content": []}), "S10",
                                      "Assistant message must have either content or tool_calls, but not none.",
                                      "messages.[1].content", 1),
    "no content key on plain assistant": (body(user(), {"role": "assistant"}), "S10",
                                          "Assistant message must have either content or tool_calls, but not none.",
                                          "messages.[1].content", 1),
    "empty content after emptied tool_calls": (body(user(), {"role": "assistant", "content": None,
                                                            "tool_calls": []}), "OAI-4",
                                               "Invalid 'messages[1].tool_calls': empty array. Expected an array "
                                               "with minimum length 1, but got an empty array instead.",
                                               "messages[1].tool_calls", 1),
    # OAI-10 / S9
    "content a bare object": (body({"role": "user", "content": {"type": "text", "text": "x"}}), "OAI-10",
                              "Invalid type for 'messages[0].content': expected one of a string or array of objects, "
                              "but got an object instead.", "messages[0].content", 0),
    "content part without type": (body({"role": "user", "content": [{"text": "x"}]}), "OAI-10",
                                  "Missing required parameter: 'messages[0].content[0].type'.",
                                  "messages[0].content[0].type", 0),
    "tool content as text parts": (body(user(), asst_calls("call_a"),
                                        dict(tool("call_a"), content=[{"type": "text", "text": "Rainy"}])), "S9",
                                   "'messages.2' : for 'role:tool' the following must be satisfied"
                                   "[('messages.2.content' : value must be a string)]", "messages.2.content", 2),
    "image in tool message": (body(user(), asst_calls("call_a"), dict(tool("call_a"), content=[
        {"type": "image_url", "image_url": {"url": "data:,"}}])), "E-TOOL-IMG",
        "Invalid 'messages[2]'. Image URLs are only allowed for messages with role 'user', but this message with "
        "role 'tool' contains an image URL.", "messages[2]", 2),
    # S12
    "tool-call turn before any user turn": (body(system(), asst_calls("call_a"), tool("call_a"), user()), "S12",
                                            "Please ensure that function call turn comes immediately after a user "
                                            "turn or after a function response turn.", "messages.[1].role", 1),
}


@pytest.mark.parametrize("history, rule, text, param, index", REJECTED.values(), ids=REJECTED.keys())
def test_each_rule_rejects_with_its_id_and_exact_text(history, rule, text, param, index):
    found = violations(history)
    assert found, "expected a violation"
    first = found[0]
    assert (first.rule, first.message, first.param, first.index) == (rule, text, param, index)
    error = first_error(history)
    assert error == {"error": {"message": text, "type": "invalid_request_error", "param": param,
                               "code": first.code}}


def test_undeclared_id_in_a_block_is_an_orphan_and_leaves_the_call_unanswered():
    found = violations(body(user(), asst_calls("call_a"), tool("call_zz"), asst()))
    assert [(v.rule, v.index) for v in found] == [("OAI-2", 1), ("OAI-1", 2)]
    assert found[0].message == UNANSWERED + "call_a"
    assert "S2" in found[1].rules


def test_related_rule_ids_and_codes():
    oai2 = violations(body(user(), asst_calls("call_a")))[0]
    assert oai2.rules == ("OAI-2", "S1", "S3")
    too_long = violations(body(user(), asst_calls(ID_41), tool(ID_41)))[0]
    assert too_long.code == "string_above_max_length" and "E-ID-40" in too_long.rules
    assert violations(body(user(), {"role": "assistant", "content": "x", "tool_calls": []}))[0].rules == ("OAI-4", "S8")


def test_shape_violations_come_before_sequence_violations():
    history = body(tool("call_orphan"), user(), {"role": "assistant", "content": None,
                                                 "tool_calls": [call("call_a", arguments="{")]}, tool("call_a"))
    rules = [v.rule for v in violations(history)]
    assert rules == ["S7", "OAI-1"]


def test_all_violations_are_reported_in_one_pass():
    history = body(tool("x"), user(), asst_calls("call_a", "call_b"), tool("call_a"), tool("call_a"),
                   {"role": "user", "content": None})
    assert [v.rule for v in violations(history)] == ["OAI-9", "OAI-1", "OAI-2", "S5"]


def test_violation_is_frozen():
    v = Violation("S4", "x")
    with pytest.raises(AttributeError):
        v.rule = "S5"  # type: ignore[misc]


# property: well-formed histories (any number of rounds, parallel calls, shuffled results) are accepted


@st.composite
def well_formed_histories(draw):
    messages = [system()] if draw(st.booleans()) else []
    messages.append(user())
    counter = 0
    for _ in range(draw(st.integers(0, 6))):
        n_calls = draw(st.integers(1, 4))
        ids = [f"call_{counter + i}" for i in range(n_calls)]
        counter += n_calls
        messages.append(asst_calls(*ids, content=draw(st.sampled_from([None, "", "thinking"]))))
        messages.extend(tool(i) for i in draw(st.permutations(ids)))
        if draw(st.booleans()):
            messages.append(asst())
            messages.append(user("next"))
    return body(*messages)


@settings(max_examples=examples(150))
@given(well_formed_histories())
def test_generated_well_formed_histories_are_accepted(history):
    assert violations(history) == []


@settings(max_examples=examples(150))
@given(well_formed_histories(), st.data())
def test_dropping_any_tool_message_is_reported(history, data):
    tool_positions = [i for i, m in enumerate(history["messages"]) if m["role"] == "tool"]
    if not tool_positions:
        return
    drop = data.draw(st.sampled_from(tool_positions))
    broken = body(*(m for i, m in enumerate(history["messages"]) if i != drop))
    assert "OAI-2" in {v.rule for v in violations(broken)}


# --------------------------------------------------------------------------------------------------
# the strict upstream over a real uvicorn server
# --------------------------------------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]
CALL_ID = re.compile(r"^call_[A-Za-z0-9]{24}$")


upstream, recorder = served_fixtures(lambda: make_strict_upstream(seed=7), recorder="recorder")


@pytest.fixture
def client(upstream, recorder):
    with httpx.Client(base_url=upstream[0], timeout=10, verify=TLS) as client:
        yield client


def _ask(client, messages, **extra):
    headers = extra.pop("headers", {})
    return client.post("/v1/chat/completions", json={"model": "gpt-strict-test", "messages": messages,
                                                     "tools": TOOLS, **extra}, headers=headers)


def test_upstream_answers_user_turn_with_parallel_tool_calls(client, recorder):
    response = _ask(client, [user("weather?")], headers={"authorization": "Bearer sk-test"})
    assert response.status_code == 200
    data = response.json()
    assert data["object"] == "chat.completion" and data["id"].startswith("chatcmpl-")
    assert isinstance(data["created"], int) and data["model"] == "gpt-strict-test"
    assert set(data["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
    choice = data["choices"][0]
    assert (choice["index"], choice["finish_reason"], choice["logprobs"]) == (0, "tool_calls", None)
    message = choice["message"]
    assert (message["role"], message["content"], message["refusal"]) == ("assistant", None, None)
    calls = message["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    assert [c["function"]["arguments"] for c in calls] == ['{"city": "Paris", "n": 1}', '{"city": "Tokyo", "n": 2}']
    assert all(CALL_ID.match(c["id"]) and c["type"] == "function" for c in calls)
    assert len({c["id"] for c in calls}) == 2
    assert recorder.emitted_calls == calls and recorder.emitted_turns == [calls]
    received = recorder.last
    assert received.headers["Authorization"] == "Bearer sk-test"
    assert received.json["messages"] == [user("weather?")] and received.body_bytes == response.request.content


@pytest.mark.parametrize("n", [1, 3])
def test_upstream_parallel_call_count_header(client, n):
    response = _ask(client, [user()], headers={"x-test-parallel-calls": str(n)})
    assert len(response.json()["choices"][0]["message"]["tool_calls"]) == n


def test_upstream_full_round_trip(client, recorder):
    first = _ask(client, [user()]).json()["choices"][0]["message"]
    history = [user(), {"role": "assistant", "content": None, "tool_calls": first["tool_calls"]},
               *(tool(c["id"], "sunny") for c in first["tool_calls"])]
    response = _ask(client, history)
    assert response.status_code == 200
    answer = response.json()["choices"][0]
    assert answer["finish_reason"] == "stop"
    assert answer["message"]["content"] == "Received 2 tool results."
    assert "tool_calls" not in answer["message"]
    assert recorder.rejections == []


def _sse_events(response: httpx.Response) -> list:
    assert response.headers["content-type"].startswith("text/event-stream")
    events = []
    for line in response.text.split("\n\n"):
        if line:
            assert line.startswith("data: ")
            payload = line[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def test_upstream_streams_tool_call_deltas(client, recorder):
    response = _ask(client, [user()], stream=True, stream_options={"include_usage": True},
                    headers={"x-test-parallel-calls": "3"})
    assert response.status_code == 200
    events = _sse_events(response)
    assert events[-1] == "[DONE]"
    usage_chunk, finish_chunk, chunks = events[-2], events[-3], events[:-2]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["total_tokens"] > 0
    assert finish_chunk["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}
    assert all(c["object"] == "chat.completion.chunk" and c["usage"] is None for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"

    assembled: dict[int, dict] = {}
    argument_pieces: dict[int, int] = {}
    for chunk in chunks:
        for delta in chunk["choices"][0]["delta"].get("tool_calls", []):
            i = delta["index"]
            if i not in assembled:
                assert {"id", "type"} <= set(delta) and "name" in delta["function"]
                assembled[i] = {"id": delta["id"], "type": delta["type"],
                                "function": {"name": delta["function"]["name"], "arguments": ""}}
            else:
                assert "id" not in delta and "name" not in delta["function"]
            piece = delta["function"].get("arguments", "")
            assembled[i]["function"]["arguments"] += piece
            argument_pieces[i] = argument_pieces.get(i, 0) + bool(piece)
    calls = [assembled[i] for i in sorted(assembled)]
    assert calls == recorder.emitted_turns[-1] and len(calls) == 3
    assert all(count > 1 for count in argument_pieces.values())


def test_upstream_streams_text_answer_without_usage(client):
    first = _ask(client, [user()], headers={"x-test-parallel-calls": "1"}).json()["choices"][0]["message"]
    history = [user(), {"role": "assistant", "content": None, "tool_calls": first["tool_calls"]},
               tool(first["tool_calls"][0]["id"])]
    events = _sse_events(_ask(client, history, stream=True))
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "stop"
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1])
    assert text == "Received 1 tool result."
    assert sum(1 for e in events[:-1] if e["choices"][0]["delta"].get("content")) > 1
    assert all("usage" not in e for e in events[:-1])


def test_upstream_rejects_orphan_tool_message_with_oai1(client, recorder):
    response = _ask(client, [user(), tool("call_gone")])
    assert response.status_code == 400
    expected = {"error": {"message": ORPHAN, "type": "invalid_request_error", "param": "messages.[1].role",
                          "code": None}}
    assert response.json() == expected
    assert recorder.rejections == [expected] and recorder.emitted_calls == []
    assert len(recorder.requests) == 1


def test_upstream_models_and_unknown_paths(client):
    models = client.get("/v1/models").json()
    assert models["object"] == "list" and models["data"][0]["object"] == "model"
    missing = client.get("/v1/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "Invalid URL (GET /v1/nothing)"


def test_upstream_api_key_and_reset():
    app, recorder = make_strict_upstream(api_key="sk-good")
    with serve(app) as base_url:
        bad = httpx.post(f"{base_url}/v1/chat/completions", json=body(user()),
                         headers={"authorization": "Bearer sk-bad"}, verify=TLS)
        good = httpx.post(f"{base_url}/v1/chat/completions", json=body(user()),
                          headers={"authorization": "Bearer sk-good"}, verify=TLS)
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_api_key"
    assert good.json()["choices"][0]["message"]["content"] == "Hello from the strict upstream."
    assert len(recorder.requests) == 2
    recorder.reset()
    assert recorder.requests == [] and recorder.responses == []


def test_skip_leaves_out_rules_by_primary_id():
    history = body(system(), asst_calls("call_a"), tool("call_a"), user())
    assert [v.rule for v in violations(history)] == ["S12"]
    assert violations(history, skip=("S12",)) == []
    assert first_error(history, skip={"S12"}) is None


def test_upstream_skip_rules():
    app, _ = make_strict_upstream(skip_rules=("S12",))
    with serve(app) as base_url:
        response = httpx.post(f"{base_url}/v1/chat/completions",
                              json=body(system(), asst_calls("call_a"), tool("call_a")), verify=TLS)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Received 1 tool result."
