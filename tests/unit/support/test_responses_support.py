"""Tests of the Responses test support: the strict validator (rule by rule, RS-1 .. RS-18 of the catalogue) and the
scripted Responses upstream over uvicorn (answers, storage, ``previous_response_id``, the SSE event sequence checked
against the ``openai`` package's own types).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from proxy.dialects.responses.capture import CAPTURE
from tests.support.client_tls import TLS
from tests.support.responses_upstream import custom_input, function_arguments, make_responses_upstream, parse_sse
from tests.support.responses_validator import ServerState, error_for, first_violation, resolve, status_of, violations
from tests.support.served import served_fixtures
from tests.support.strict_upstream import serve

# --------------------------------------------------------------------------------------------------
# history builders
# --------------------------------------------------------------------------------------------------


def user(text: str = "weather?") -> dict:
    return {"role": "user", "content": text}


def fc(call_id: str, item_id: str | None = None, name: str = "get_weather") -> dict:
    item = {"type": "function_call", "call_id": call_id, "name": name, "arguments": '{"city":"Paris"}'}
    return {"id": item_id, **item} if item_id else item


def ctc(call_id: str) -> dict:
    return {"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch", "input": "patch"}


def out(call_id: str, kind: str = "function_call_output") -> dict:
    return {"type": kind, "call_id": call_id, "output": "sunny"}


def rs(item_id: str | None = None) -> dict:
    item = {"type": "reasoning", "encrypted_content": "gAAAAAB-blob", "summary": []}
    return {"id": item_id, **item} if item_id else item


def msg(text: str = "done", item_id: str | None = None) -> dict:
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return {"id": item_id, **item} if item_id else item


def body(*items: dict, **extra: Any) -> dict:
    return {"model": "gpt-5.5", "input": list(items), **extra}


def stored() -> ServerState:
    """A server that answered one request with [reasoning, two calls] and another with [reasoning, message]."""
    state = ServerState()
    state.remember("resp_1", [user()], [rs("rs_1"), fc("call_a", "fc_1"), fc("call_b", "fc_2")])
    state.remember("resp_2", [user("hi")], [rs("rs_2"), msg("hello", "msg_2")])
    return state


# --------------------------------------------------------------------------------------------------
# valid histories
# --------------------------------------------------------------------------------------------------

VALID = {
    "string input": {"model": "m", "input": "hi"},
    "no input": {"model": "m"},
    "one call without ids": body(user(), fc("call_a"), out("call_a"), msg()),
    "Codex order: all calls, then all outputs, any order": body(user(), fc("call_a"), fc("call_b"), ctc("call_c"),
                                                                out("call_c", "custom_tool_call_output"),
                                                                out("call_b"), out("call_a")),
    "stateless reasoning (no id) before its calls": body(user(), rs(), fc("call_a"), out("call_a"), store=False),
    "store: false, every item with its id and content (Codex)": body(user(), rs("rs_1"), fc("call_a", "fc_1"),
                                                                      dict(out("call_a"), id="fco_1"), store=False),
    "local shell answered by function_call_output (Codex)": body(user(), {"type": "local_shell_call", "call_id": "c1"},
                                                                 out("c1")),
    "local shell answered by its own output (id = call id)": body(user(), {"type": "local_shell_call", "call_id": "c1"},
                                                                  {"type": "local_shell_call_output", "id": "c1", "output": "{}"}),
    "server-run tool search needs no output": body(user(), {"type": "tool_search_call", "execution": "server",
                                                              "call_id": "ts_1", "arguments": {}}),
    "unknown item types pass": body({"type": "additional_tools", "role": "developer", "tools": []}, user(),
                                    {"type": "compaction", "encrypted_content": "x"}),
    "stored items replayed with their reasoning": body(user(), rs("rs_1"), fc("call_a", "fc_1"), fc("call_b", "fc_2"),
                                                       out("call_a"), out("call_b")),
    "item_reference to a stored message and its reasoning": body(user("hi"), {"type": "item_reference", "id": "rs_2"},
                                                                 {"id": "msg_2"}, user("more")),
    "previous_response_id answering every call": body(out("call_a"), out("call_b"), previous_response_id="resp_1"),
}


@pytest.mark.parametrize("history", list(VALID.values()), ids=list(VALID))
def test_valid_histories_are_accepted(history: dict) -> None:
    assert violations(history, stored()) == []
    assert error_for(history, stored()) is None


# --------------------------------------------------------------------------------------------------
# each rule: id, status, exact text, param, code, index
# --------------------------------------------------------------------------------------------------

LONG = "call_" + "x" * 111
CASES = [
    ("RS-1", body(user(), fc("call_sU7X"), msg()), 400,
     "No tool output found for function call call_sU7X.", "input", None, 1),
    ("RS-2", body(user(), ctc("call_nNNw")), 400, "No tool output found for custom tool call call_nNNw.", "input", None, 1),
    ("RS-2", body(user(), {"type": "shell_call", "call_id": "call_sh", "action": {"commands": []}}), 400,
     "No tool output found for shell call call_sh.", "input", None, 1),
    ("RS-1", body(out("call_a"), previous_response_id="resp_1"), 400,
     "No tool output found for function call call_b.", "input", None, None),
    ("RS-3", body(user(), out("call_uelf")), 400,
     "No tool call found for function call output with call_id call_uelf.", "input", None, 1),
    ("RS-3", body(user(), out("call_c", "custom_tool_call_output"), ctc("call_c")), 400,
     "No tool call found for custom tool call output with call_id call_c.", "input", None, 1),
    ("RS-4", body(user(), fc("call_a", "fc_1"), fc("call_b", "fc_2"), out("call_a"), out("call_b")), 400,
     "Item 'fc_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1'.", "input", None, 1),
    ("RS-5", body(user("hi"), {"type": "item_reference", "id": "msg_2"}, user("more")), 400,
     "Item 'msg_2' of type 'message' was provided without its required 'reasoning' item: 'rs_2'.", "input", None, 1),
    ("RS-6", body(user(), rs("rs_1")), 400,
     "Item 'rs_1' of type 'reasoning' was provided without its required following item.", "input", None, 1),
    ("RS-6", body(user(), rs("rs_1"), user("again")), 400,
     "Item 'rs_1' of type 'reasoning' was provided without its required following item.", "input", None, 1),
    ("RS-7", body(user(), {"type": "reasoning", "id": "rs_0496", "summary": []}, fc("call_a"), out("call_a"), store=False), 404,
     "Item with id 'rs_0496' not found. Items are not persisted when `store` is set to false. Try again with `store` "
     "set to true, or remove this item from your input.", "input", None, 1),
    ("RS-7", body({"type": "item_reference", "id": "msg_2"}, store=False), 404,
     "Item with id 'msg_2' not found. Items are not persisted when `store` is set to false. Try again with `store` "
     "set to true, or remove this item from your input.", "input", None, 0),
    ("RS-8", body(user(), rs("rs_04332f"), fc("call_a"), out("call_a")), 404,
     "Item with id 'rs_04332f' not found.", "input", None, 1),
    ("RS-9", body(user(), rs("rs_1"), rs("rs_1"), fc("call_a", "fc_1"), out("call_a")), 400,
     "Duplicate item found with id rs_1. Remove duplicate items from your input and try again.", "input", None, 2),
    ("RS-9", body(fc("call_a", "fc_1"), out("call_a"), out("call_b"), previous_response_id="resp_1"), 400,
     "Duplicate item found with id fc_1. Remove duplicate items from your input and try again.", "input", None, 0),
    ("RS-10", body(out("call_a"), previous_response_id="resp_0f09"), 400,
     "Previous response with id 'resp_0f09' not found.", "previous_response_id", "previous_response_not_found", None),
    ("RS-12", body(user(), msg("x", "item_3bc5")), 400,
     "Invalid 'input[1].id': 'item_3bc5'. Expected an ID that begins with 'msg'.", "input[1].id", "invalid_value", 1),
    ("RS-12", body(user(), fc("call_a", "call_a"), out("call_a")), 400,
     "Invalid 'input[1].id': 'call_a'. Expected an ID that begins with 'fc'.", "input[1].id", "invalid_value", 1),
    ("RS-12", body(user(), rs("5f0c-uuid"), fc("call_a"), out("call_a")), 400,
     "Invalid 'input[1].id': '5f0c-uuid'. Expected an ID that begins with 'rs'.", "input[1].id", "invalid_value", 1),
    ("RS-13", body(user(), msg("x", "msg.proxy:2")), 400,
     "Invalid 'input[1].id': 'msg.proxy:2'. Expected an ID that contains letters, numbers, underscores, or dashes, but "
     "this value contained additional characters.", "input[1].id", "invalid_value", 1),
    ("RS-14", body(user(), fc(LONG), out(LONG)), 400,
     "Invalid 'input[1].call_id': string too long. Expected a string with maximum length 64, but got a string with "
     "length 116 instead.", "input[1].call_id", "string_above_max_length", 1),
    ("RS-14", body(user(), msg("x", "msg_" + "9" * 1756)), 400,
     "Invalid 'input[1].id': string too long. Expected a string with maximum length 64, but got a string with "
     "length 1760 instead.", "input[1].id", "string_above_max_length", 1),
    ("RS-15", body(user(), fc("call_a"), {"type": "function_call_output", "output": "x"}), 400,
     "Missing required parameter: 'input[2].call_id'.", "input[2].call_id", "missing_required_parameter", 2),
    ("RS-15", body(user(), fc("call_a"), out("")), 400,
     "Invalid 'input[2].call_id': empty string. Expected a string with minimum length 1, but got an empty string "
     "instead.", "input[2].call_id", "empty_string", 2),
    ("BASE", ["not", "an", "object"], 400, "Invalid type for 'body': expected an object, but got an array instead.",
     "body", "invalid_type", None),
    ("BASE", {"model": "m", "input": 5}, 400,
     "Invalid type for 'input': expected a string or an array, but got an integer instead.", "input", "invalid_type", None),
    ("BASE", body(user(), "text"), 400, "Invalid type for 'input[1]': expected an object, but got a string instead.",
     "input[1]", "invalid_type", 1),
]


@pytest.mark.parametrize(("rule", "history", "status", "text", "param", "code", "index"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_rule_with_its_status_and_exact_text(rule: str, history: Any, status: int, text: str, param: str,
                                                  code: str | None, index: int | None) -> None:
    v = first_violation(history, stored())
    assert v is not None
    assert (v.rule, v.message, v.param, v.code, v.index) == (rule, text, param, code, index)
    assert status_of(v) == status
    assert error_for(history, stored()) == (status, {"error": {"message": text, "type": "invalid_request_error",
                                                               "param": param, "code": code}})


def test_a_server_that_verifies_encrypted_content_takes_back_only_what_it_minted_for_the_key() -> None:
    """RS-11, off unless the state verifies: a blob minted for another key, or never minted, is refused, in the wording
    naming the item when it has an id, else quoting the blob; a compaction item's blob is verified too."""
    history = body(user(), rs(), fc("call_a"), out("call_a"), store=False)
    assert violations(history, ServerState()) == []  # no verification: every blob passes
    state = ServerState(encrypted={})
    state.mint("gAAAAAB-blob", "Bearer sk-a")
    assert violations(history, state, key="Bearer sk-a") == []
    assert error_for(history, state, key="Bearer sk-b") == (400, {"error": {
        "message": "The encrypted content gAAA...blob could not be verified.", "type": "invalid_request_error", "param": None,
        "code": "invalid_encrypted_content"}})
    state.remember("resp_1", [user()], [rs("rs_1"), fc("call_a", "fc_1")])
    named = first_violation(body(user(), rs("rs_1"), fc("call_a", "fc_1"), out("call_a")), state, key="Bearer sk-b")
    assert named is not None and (named.rule, named.index, named.message) == (
        "RS-11", 1, "The encrypted content for item rs_1 could not be verified. Reason: Encrypted content could not be decrypted or parsed.")
    compaction = first_violation(body({"type": "compaction", "encrypted_content": "gAAAA-elsewhere"}, user()), state, key="Bearer sk-a")
    assert compaction is not None and (compaction.rule, compaction.index) == ("RS-11", 0)


def test_repairs_of_the_catalogue_are_accepted() -> None:
    """docs/provider-rules.md section 5.3: stripping ids cures RS-4/RS-7; a synthetic output cures RS-1; dropping resent items cures RS-9."""
    state = stored()
    assert first_violation(body(user(), fc("call_a"), fc("call_b"), out("call_a"), out("call_b")), state) is None
    assert first_violation(body(user(), rs(), fc("call_a"), out("call_a"), store=False), state) is None
    assert first_violation(body(user(), fc("call_sU7X"), out("call_sU7X") | {"output": "aborted"}), state) is None
    assert first_violation(body(out("call_a"), out("call_b"), previous_response_id="resp_1"), state) is None


def test_an_output_of_another_family_answers_nothing() -> None:
    found = violations(body(user(), ctc("call_c"), out("call_c")), stored())
    assert [(v.rule, v.index, v.message) for v in found] == [
        ("RS-2", 1, "No tool output found for custom tool call call_c."),
        ("RS-3", 2, "No tool call found for function call output with call_id call_c."),
    ]


def test_phases_shape_then_lookup_then_identity_then_pairing() -> None:
    history = body(out("call_z"), msg("x", "item_1"), rs("rs_404"))
    assert [(v.rule, v.index) for v in violations(history, stored())] == [
        ("RS-12", 1), ("RS-8", 1), ("RS-8", 2), ("RS-6", 2), ("RS-3", 0)]
    # An unknown previous response stops the checks that need it.
    assert [v.rule for v in violations(body(out("call_a"), previous_response_id="resp_x"))] == ["RS-10"]


def test_without_state_every_server_id_is_unknown() -> None:
    assert first_violation(body(user(), rs("rs_1"), fc("call_a", "fc_1"), out("call_a"))).rule == "RS-8"  # type: ignore[union-attr]


def test_server_state_remembers_reasoning_and_history() -> None:
    state = stored()
    assert state.reasoning_of == {"fc_1": "rs_1", "fc_2": "rs_1", "msg_2": "rs_2"}
    assert set(state.items) == {"rs_1", "fc_1", "fc_2", "rs_2", "msg_2"}
    assert state.histories["resp_2"] == [user("hi"), rs("rs_2"), msg("hello", "msg_2")]
    assert resolve(body({"id": "msg_2"}, previous_response_id="resp_1"), state) == [
        user(), rs("rs_1"), fc("call_a", "fc_1"), fc("call_b", "fc_2"), msg("hello", "msg_2")]
    assert resolve({"input": "hi"}) == [user("hi")]


# --- profiles ---------------------------------------------------------------------------------------------

# (history, DeepSeek's text, what the openai profile says of the same history)
DEEPSEEK_CASES = [
    (body(user(), fc("call_00_ET"), {"role": "developer", "content": "hook"}, out("call_00_ET")),
     "No tool output found for tool call call_00_ET", None),  # accepted by OpenAI [claimed]
    (body(user(), fc("call_00_ET"), rs(), out("call_00_ET")), "No tool output found for tool call call_00_ET", "RS-6"),
    (body(user(), out("call_00_x")), "No tool call found for tool output with call_id call_00_x", "RS-3"),
]


@pytest.mark.parametrize(("history", "text", "openai"), DEEPSEEK_CASES)
def test_deepseek_rejects_any_item_between_a_call_and_its_output(history: dict, text: str, openai: str | None) -> None:
    assert [v.rule for v in violations(history, profile="deepseek")][:1] == ["RS-17"]
    assert error_for(history, profile="deepseek") == (400, {"error": {
        "message": text, "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}})
    assert [v.rule for v in violations(history)][:1] == ([openai] if openai else [])


def test_deepseek_accepts_calls_then_outputs_and_ignores_ids() -> None:
    history = body(user(), rs("rs_x"), fc("call_a", "fc_x"), fc("call_b"), out("call_b"), out("call_a"), msg())
    assert violations(history, profile="deepseek") == []


def test_kimi_chat_wording() -> None:
    history = body(user(), fc("view_image:24"), fc("view_image:25"), out("view_image:25"), user("next"))
    assert error_for(history, profile="kimi") == (400, {"error": {
        "message": "Invalid request: an assistant message with 'tool_calls' must be followed by tool messages "
                   "responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                   "view_image:24", "type": "invalid_request_error", "param": None, "code": None}})
    both = first_violation(body(user(), fc("a:1"), fc("a:2")), profile="kimi")
    assert both is not None and both.message.endswith("did not have response messages: a:1, a:2")
    orphan = first_violation(body(user(), out("a:1")), profile="kimi")
    assert orphan is not None and (orphan.rule, orphan.related) == ("RS-18", ("KI-1",))
    assert orphan.message == "Invalid request: messages with role 'tool' must be a response to a preceding message with 'tool_calls'"


def test_unknown_profile() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        violations(body(user()), profile="anthropic")


# --------------------------------------------------------------------------------------------------
# the upstream over a real uvicorn server
# --------------------------------------------------------------------------------------------------

TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
         {"type": "function", "name": "get_time", "parameters": {"type": "object"}}]
CUSTOM_TOOLS = [TOOLS[0], {"type": "custom", "name": "apply_patch"}]
CALL_ID = re.compile(r"^call_[A-Za-z0-9]{24}$")
EVENTS = TypeAdapter(ResponseStreamEvent)


def item_id(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"^{prefix}_[0-9a-f]{{50}}$")


upstream, recorder = served_fixtures(lambda: make_responses_upstream(seed=7), recorder="recorder")


@pytest.fixture
def client(upstream, recorder):
    with httpx.Client(base_url=upstream[0], timeout=10, verify=TLS) as client:
        yield client


def ask(client: httpx.Client, *items: Any, tools: list | None = None, **extra: Any) -> httpx.Response:
    headers = extra.pop("headers", {})
    return client.post("/v1/responses", json={"model": "gpt-5.5", "input": list(items), "tools": TOOLS if tools is None else tools,
                                              **extra}, headers=headers)


def outputs_for(calls: list[dict]) -> list[dict]:
    return [out(c["call_id"], "custom_tool_call_output" if c["type"] == "custom_tool_call" else "function_call_output")
            for c in calls]


def test_upstream_answers_a_user_turn_like_a_reasoning_model(client, recorder) -> None:
    response = ask(client, user())
    assert response.status_code == 200
    data = response.json()
    Response.model_validate(data)
    assert data["object"] == "response" and item_id("resp").match(data["id"]) and data["status"] == "completed"
    reasoning, *calls = data["output"]
    assert list(reasoning) == ["id", "type", "summary"] and item_id("rs").match(reasoning["id"])  # no include: no blob
    assert [c["name"] for c in calls] == ["get_weather", "get_time"]
    assert [c["arguments"] for c in calls] == [function_arguments(0), function_arguments(1)] == [
        '{"city": "Paris", "n": 1}', '{"city": "Tokyo", "n": 2}']
    assert all(CALL_ID.match(c["call_id"]) and item_id("fc").match(c["id"]) and c["type"] == "function_call" for c in calls)
    assert recorder.emitted_turns == [data["output"]] and recorder.responses == [data]
    assert recorder.last.body_bytes == response.request.content and recorder.last.path == "/v1/responses"


def test_upstream_encrypted_content_when_included_or_stateless(client) -> None:
    included = ask(client, user(), include=["reasoning.encrypted_content"]).json()["output"][0]
    stateless = ask(client, user(), store=False).json()["output"][0]
    assert list(included) == ["id", "type", "encrypted_content", "summary"]
    assert included["encrypted_content"].startswith("gAAAAA") and stateless["encrypted_content"].startswith("gAAAAA")
    assert included["encrypted_content"] != stateless["encrypted_content"]


def test_upstream_custom_tool_calls_and_parallel_header(client) -> None:
    calls = ask(client, user(), tools=CUSTOM_TOOLS, headers={"x-test-parallel-calls": "3"}).json()["output"][1:]
    assert [c["type"] for c in calls] == ["function_call", "custom_tool_call", "function_call"]
    assert calls[1]["input"] == custom_input(1) == "lookup Tokyo 2" and item_id("ctc").match(calls[1]["id"])
    assert ask(client, user(), headers={"x-test-parallel-calls": "0"}).status_code == 400
    text = ask(client, user(), tools=[]).json()["output"]
    assert [i["type"] for i in text] == ["reasoning", "message"]
    assert text[1]["content"][0]["text"] == "Hello from the responses upstream."


def test_upstream_round_trip_with_stored_ids(client, recorder) -> None:
    output = ask(client, user(), tools=CUSTOM_TOOLS).json()["output"]
    answer = ask(client, user(), *output, *outputs_for(output[1:]), tools=CUSTOM_TOOLS)
    assert answer.status_code == 200
    reasoning, message = answer.json()["output"]
    assert message["content"][0]["text"] == "Received 2 tool outputs." and item_id("msg").match(message["id"])
    # The stored calls without their reasoning item: RS-4, recorded as a rejection.
    rejected = ask(client, user(), *output[1:], *outputs_for(output[1:]), tools=CUSTOM_TOOLS)
    assert rejected.status_code == 400
    assert rejected.json()["error"]["message"] == (f"Item '{output[1]['id']}' of type 'function_call' was provided without "
                                                   f"its required 'reasoning' item: '{output[0]['id']}'.")
    assert recorder.rejections == [rejected.json()]
    # The catalogue's repair: the same items without ids are fresh input.
    stripped = [{k: v for k, v in item.items() if k != "id"} for item in output[1:]]
    assert ask(client, user(), *stripped, *outputs_for(output[1:]), tools=CUSTOM_TOOLS).status_code == 200
    # The answered message needs its reasoning item too (RS-5) when replayed by reference.
    assert ask(client, user(), {"type": "item_reference", "id": message["id"]}, user("more")).json()["error"]["message"] == (
        f"Item '{message['id']}' of type 'message' was provided without its required 'reasoning' item: '{reasoning['id']}'.")


def test_upstream_previous_response_id(client) -> None:
    first = ask(client, user()).json()
    calls = first["output"][1:]
    half = ask(client, *outputs_for(calls[:1]), previous_response_id=first["id"])
    assert half.status_code == 400
    assert half.json()["error"]["message"] == f"No tool output found for function call {calls[1]['call_id']}."
    resent = ask(client, calls[0], *outputs_for(calls), previous_response_id=first["id"])
    assert resent.json()["error"]["message"].startswith(f"Duplicate item found with id {calls[0]['id']}.")
    answer = ask(client, *outputs_for(calls), previous_response_id=first["id"]).json()
    assert answer["previous_response_id"] == first["id"]
    assert answer["output"][1]["content"][0]["text"] == "Received 2 tool outputs."
    unknown = ask(client, user(), previous_response_id="resp_gone")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (400, "previous_response_not_found")


def test_upstream_store_false(client) -> None:
    first = ask(client, user(), store=False).json()
    assert client.get(f"/v1/responses/{first['id']}").status_code == 404
    # Items that carry their content are taken with their ids; a reference to one is looked up, and not found.
    assert ask(client, user(), *first["output"], *outputs_for(first["output"][1:]), store=False).status_code == 200
    referenced = {"type": "item_reference", "id": first["output"][1]["id"]}
    replay = ask(client, user(), first["output"][0], referenced, *outputs_for(first["output"][1:]), store=False)
    assert replay.status_code == 404
    assert replay.json()["error"]["message"].startswith(f"Item with id '{referenced['id']}' not found. Items are not persisted")
    assert ask(client, *outputs_for(first["output"][1:]), previous_response_id=first["id"]).status_code == 400  # RS-10


def test_upstream_retrieve_and_passthrough(client, recorder) -> None:
    data = ask(client, user()).json()
    assert client.get(f"/v1/responses/{data['id']}").json() == data
    missing = client.get("/v1/responses/resp_nope")
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "Response with id 'resp_nope' not found."
    echo = client.post("/v1/responses/compact?x=1", content=b"{}")
    assert echo.json() == {"object": "responses_upstream.passthrough", "method": "POST", "path": "/v1/responses/compact",
                           "query": "x=1", "body_bytes": 2}
    assert [r.path for r in recorder.requests] == ["/v1/responses", "/v1/responses/" + data["id"], "/v1/responses/resp_nope",
                                                   "/v1/responses/compact"]
    assert client.post("/v1/responses", content=b"{nope").status_code == 400


def test_upstream_stream_is_the_real_event_sequence(client, recorder) -> None:
    response = ask(client, user(), tools=CUSTOM_TOOLS, stream=True, include=["reasoning.encrypted_content"])
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.content)
    for event in events:
        EVENTS.validate_python(event)  # every event is one of the openai package's stream event types
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.output_item.done"]
    assert kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds and "response.custom_tool_call_input.done" in kinds
    assert all("obfuscation" in e for e in events if e["type"].endswith(".delta"))
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    final = events[-1]["response"]
    assert done == final["output"] == recorder.emitted_turns[0]
    assert events[0]["response"]["output"] == [] and events[0]["response"]["status"] == "in_progress"
    assert added[0]["encrypted_content"] != done[0]["encrypted_content"]
    assert (added[1]["arguments"], added[1]["status"]) == ("", "in_progress") and added[2]["input"] == ""
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    assert deltas == done[1]["arguments"]
    # toolmend's capture reads the stream into the turn it reads from the stored JSON.
    reader = CAPTURE.stream(None)
    for i in range(0, len(response.content), 97):
        reader.feed(response.content[i:i + 97])
    stored_json = client.get(f"/v1/responses/{final['id']}").content
    assert reader.finished and reader.turns() == CAPTURE.from_json(stored_json)
    assert reader.turns()[0]["items"] == done


def test_upstream_streams_a_text_answer(client) -> None:
    events = parse_sse(ask(client, user(), tools=[], stream=True).content)
    for event in events:
        EVENTS.validate_python(event)
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "Hello from the responses upstream."
    assert "response.content_part.added" in [e["type"] for e in events]


def test_upstream_profiles() -> None:
    app, _ = make_responses_upstream(profile="deepseek")
    with serve(app) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
        first = ask(client, user()).json()["output"]
        hook = {"role": "developer", "content": "PostToolUse hook"}
        broken = ask(client, user(), *first[1:2], hook, *outputs_for(first[1:2]), headers={"x-test-parallel-calls": "1"})
        assert broken.status_code == 400
        assert broken.json()["error"] == {"message": f"No tool output found for tool call {first[1]['call_id']}",
                                          "type": "invalid_request_error", "param": None, "code": "invalid_request_error"}
    with pytest.raises(ValueError, match="unknown profile"):
        make_responses_upstream(profile="mistral")
