"""Responses shapes a strict server refused after toolmend, each judged by the strict validator with what the server
stored (``tests/support/responses_validator.py``): the answer the server made, the input the client sent, and what
toolmend forwards.

* One output of reasoning, an assistant message and a call resent without its reasoning (the ruling of TM405): the
  reasoning item is required by everything it produced in that output, across the message, so both lose their ids.
* That output's calls put back from memory for a client that kept only the message's text: with their reasoning
  (end to end, streamed, in ``test_responses_e2e.py``).
* An output without ``call_id`` (RS-15), a reference to a message whose reasoning is gone (RS-5), ids memory knows
  the server never issued (RS-8).
"""

from typing import Any

import orjson

from proxy.dialects.responses import RESPONSES
from proxy.repair import Policy, Result
from tests.support.responses_validator import ServerState, violations

OPENAI = RESPONSES.profile("openai")

USER = {"role": "user", "content": "Weather in Paris, the time, and patch the file?"}
RS_1 = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-1"}
MSG_1 = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "phase": "commentary",
         "content": [{"type": "output_text", "annotations": [], "text": "Let me look these up."}]}
FC_1 = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{\"city\": \"Paris\"}", "status": "completed"}
FC_2 = {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "time", "arguments": "{}", "status": "completed"}
CTC_3 = {"type": "custom_tool_call", "id": "ctc_3", "call_id": "call_3", "name": "apply_patch", "input": "*** Begin Patch", "status": "completed"}


def answered(*output: dict[str, Any], response_id: str = "resp_1") -> tuple[ServerState, dict[str, dict[str, Any]]]:
    """The server that made ``output`` for USER, and toolmend's memory of it (by each recall key)."""
    state = ServerState()
    state.remember(response_id, [USER], [dict(item) for item in output])
    keys = [item["call_id"] if "call_id" in item else item["id"] for item in output if item["type"] != "reasoning"]
    turn = {"dialect": "responses", "ids": [*keys, response_id], "response_id": response_id, "items": list(output)}
    return state, dict.fromkeys(turn["ids"], turn)


def out(call_id: str, text: str = "18C", kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "output": text}


def repaired(body: dict[str, Any], memory: dict[str, dict[str, Any]]) -> Result:
    planned = RESPONSES.plan(body, OPENAI)
    assert planned is not None
    return planned.repair({key: turn for key, turn in memory.items() if key in planned.recall}, Policy())


def without_id(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key != "id"}


def test_every_item_a_reasoning_item_produced_across_a_message_requires_it() -> None:
    state, memory = answered(RS_1, MSG_1, FC_1)
    body = {"model": "gpt-5", "input": [USER, MSG_1, FC_1, out("call_1"), {"role": "user", "content": "thanks"}]}
    # The validator ties fc_1 to rs_1 across msg_1, as the server does.
    assert state.reasoning_of == {"msg_1": "rs_1", "fc_1": "rs_1"}
    assert [v.rule for v in violations(body, state)] == ["RS-5", "RS-4"]
    result = repaired(body, memory)
    assert result.body["input"] == [USER, without_id(MSG_1), without_id(FC_1), out("call_1"), {"role": "user", "content": "thanks"}]
    assert [(f.code, f.index) for f in result.findings] == [("TM405", 1), ("TM405", 2)]
    assert violations(result.body, state) == []


def test_the_items_of_one_output_keep_their_ids_when_its_reasoning_is_there() -> None:
    state, _ = answered(RS_1, MSG_1, FC_1)
    body = {"model": "gpt-5", "input": [USER, RS_1, MSG_1, FC_1, out("call_1")]}
    assert violations(body, state) == []
    planned = RESPONSES.plan(body, OPENAI)
    assert planned is None  # nothing to look up: fc_1 and msg_1 stand after their reasoning


TEXT = "Let me look these up."
OUTPUTS = [out("call_1"), out("call_2", "9:00"), out("call_3", "patched", "custom_tool_call_output")]


def test_calls_put_back_after_a_kept_preamble_come_with_their_reasoning() -> None:
    state, memory = answered(RS_1, MSG_1, FC_1, FC_2, CTC_3)
    preamble = {"role": "assistant", "content": TEXT}  # the text the client kept, without its id
    body = {"model": "gpt-5", "input": [USER, preamble, *OUTPUTS]}
    result = repaired(body, memory)
    assert result.body["input"] == [USER, preamble, RS_1, FC_1, FC_2, CTC_3, *OUTPUTS]
    assert orjson.dumps(result.body["input"][2]) == orjson.dumps(RS_1)  # the reasoning as remembered, byte for byte
    assert [(f.code, f.calls) for f in result.findings] == [("TM101", 3)]
    assert violations(result.body, state) == []
    # Kept with its msg_ id: the reasoning now stands after it, so it loses the id (TM405), and the calls keep theirs.
    by_id = repaired({**body, "input": [USER, MSG_1, *OUTPUTS]}, memory)
    assert by_id.body["input"] == [USER, without_id(MSG_1), RS_1, FC_1, FC_2, CTC_3, *OUTPUTS] and violations(by_id.body, state) == []


def test_a_preamble_kept_with_its_reasoning_does_not_get_a_second_copy() -> None:
    state, memory = answered(RS_1, MSG_1, FC_1, FC_2, CTC_3)
    for reasoning in (without_id(RS_1), RS_1):  # self-contained (its encrypted content), or by id
        result = repaired({"model": "gpt-5", "input": [USER, reasoning, MSG_1, *OUTPUTS]}, memory)
        assert result.body["input"] == [USER, reasoning, MSG_1, FC_1, FC_2, CTC_3, *OUTPUTS]
    assert violations(result.body, state) == []


def test_an_output_without_call_id_answers_the_only_unanswered_call() -> None:
    """RS-15: Codex's app-server route sends an output without ``call_id``. With exactly one call unanswered it is
    that call's output; no call is made up for it, and no placeholder stands in for the real output."""
    state, memory = answered(RS_1, FC_1, FC_2)
    lost = {"type": "function_call_output", "output": "9:00"}
    body = {"model": "gpt-5", "input": [USER, RS_1, FC_1, FC_2, out("call_1"), lost]}
    assert [v.rule for v in violations(body, state)] == ["RS-15", "RS-1"]
    result = repaired(body, memory)
    assert result.body["input"] == [USER, RS_1, FC_1, FC_2, out("call_1"), {**lost, "call_id": "call_2"}]
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM106", 5, "attached")]
    assert violations(result.body, state) == []
    # Two calls unanswered: nothing tells which one it answers, so it is not given either.
    ambiguous = repaired({**body, "input": [USER, RS_1, FC_1, FC_2, lost]}, memory)
    assert all(item.get("call_id") not in ("call_1", "call_2") for item in ambiguous.body["input"] if item.get("output") == "9:00")


def test_a_reference_to_a_message_whose_reasoning_is_gone_keeps_the_turn() -> None:
    """RS-5: memory replays an ``item_reference`` to an assistant message made with reasoning, without the reasoning.
    The remembered message stands in its place without its id; with its reasoning referenced too, nothing changes."""
    answer = {**MSG_1, "phase": "final_answer"}
    state, memory = answered(RS_1, answer)
    more = {"role": "user", "content": "And tomorrow?"}
    body = {"model": "gpt-5", "input": [USER, {"type": "item_reference", "id": "msg_1"}, more]}
    assert [v.rule for v in violations(body, state)] == ["RS-5"]
    result = repaired(body, memory)
    assert result.body["input"] == [USER, without_id(answer), more]
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM405", 1, "replaced")]
    assert violations(result.body, state) == []
    kept_by_id = repaired({**body, "input": [USER, answer, more]}, memory)  # the message itself, by its msg_ id
    assert kept_by_id.body["input"] == [USER, without_id(answer), more] and violations(kept_by_id.body, state) == []
    whole = {**body, "input": [USER, {"type": "item_reference", "id": "rs_1"}, {"type": "item_reference", "id": "msg_1"}, more]}
    assert violations(whole, state) == [] and RESPONSES.plan(whole, OPENAI) is None  # its reasoning referenced before it


FAKE_RS = {"type": "reasoning", "id": "rs_made_up", "summary": [{"type": "summary_text", "text": "Calling the tool."}]}


def test_ids_memory_knows_the_server_never_issued_are_left_out() -> None:
    """RS-8: a reasoning item a converter made up in front of calls memory holds (made with no reasoning, or with
    another), and a made-up ``fc_`` id for a remembered call, would be looked up and not found (404)."""
    for output in ([FC_1, FC_2], [RS_1, FC_1, FC_2]):  # a model that did not reason, or one whose reasoning a filter lost
        state, memory = answered(*output)
        body = {"model": "gpt-5", "input": [USER, FAKE_RS, FC_1, FC_2, out("call_1")]}  # call_2 was interrupted
        assert violations(body, state)[0].rule == "RS-8"
        result = repaired(body, memory)
        calls = [FC_1, FC_2] if len(output) == 2 else [without_id(FC_1), without_id(FC_2)]
        assert result.body["input"][:3] == [USER, *calls]
        assert [f.code for f in result.findings] == ["TM104", "TM410"] + (["TM405", "TM405"] if len(output) == 3 else [])
        assert violations(result.body, state) == []
    # Nothing else wrong: a valid-looking input is not made to wait for the store; the upstream's 404 answers it (TM409).
    assert RESPONSES.plan({"model": "gpt-5", "input": [USER, FAKE_RS, FC_1, FC_2, out("call_1"), out("call_2")]}, OPENAI) is None
    state, memory = answered(FC_1)
    made_up = {**FC_1, "id": "fc_" + "9" * 24}  # a gateway's id for call_1
    body = {"model": "gpt-5", "input": [USER, made_up, out("call_1")]}
    assert violations(body, state)[0].rule == "RS-8"
    result = repaired(body, memory)
    assert result.body["input"] == [USER, without_id(FC_1), out("call_1")] and violations(result.body, state) == []
    # Under store: false nothing is looked up by its id: TM410 leaves it (what TM407 does with ids is its own business).
    assert "TM410" not in {f.code for f in repaired({**body, "store": False}, memory).findings}


def test_ids_memory_cannot_judge_are_the_server_s() -> None:
    """Nothing is left out where memory does not know: reasoning before a call memory does not hold, before the call
    it made, or whose id a remembered turn holds; a call remembered with the same id."""
    _, memory = answered(RS_1, FC_1)
    for items in ([USER, FAKE_RS, {**FC_2, "id": "fc_2"}, out("call_2")],  # call_2 is not remembered
                  [USER, RS_1, FC_1, out("call_1")],
                  [USER, RS_1, MSG_1, FC_1, out("call_1")]):
        planned = RESPONSES.plan({"model": "gpt-5", "input": items}, OPENAI)
        assert planned is None or planned.repair(memory, Policy()).findings == ()


def test_under_store_false_reasoning_that_tm407_drops_is_not_there_for_what_it_produced() -> None:
    rs_1 = without_id(RS_1) | {"id": "rs_1"}
    del rs_1["encrypted_content"]  # nothing without the store: TM407 drops it
    state, memory = answered(rs_1, MSG_1)
    body = {"model": "gpt-5", "store": False, "input": [USER, rs_1, MSG_1, {"role": "user", "content": "thanks"}]}
    result = repaired(body, memory)
    assert [finding.code for finding in result.findings] == ["TM405", "TM407"]
    assert result.body["input"] == [USER, without_id(MSG_1), {"role": "user", "content": "thanks"}]
    assert violations(result.body, state) == []
