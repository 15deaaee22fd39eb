"""The Responses dialect's repairs: each rule's docstring example, and the structural rules over the view.

A rule's Bad input, repaired with its Recalled turns and its Request fields, must become exactly its Good
input; where the strict Responses validator can judge (no stored items involved), Bad is rejected and
Good accepted. The view tests show what the shared structural rules do to item histories: calls put back
with their reasoning, placeholders of the call's family, where outputs may stand per profile, and that
whatever no rule touched is the very object the client sent.
"""

from typing import Any

import orjson
import pytest

from proxy.dialects.responses import RESPONSES
from proxy.dialects.responses.rules import ITEM_RULES
from proxy.repair import DEFAULT_PLACEHOLDER, Policy, Result
from proxy.repair.catalog import RuleDoc, describe
from tests.support.responses_validator import ServerState, violations

DOCS = [describe(rule) for rule in ITEM_RULES]
OPENAI = RESPONSES.profile("openai")
STRICT = RESPONSES.profile("deepseek")

USER = {"role": "user", "content": "Weather in Paris and the time?"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-opaque"}
CALL_1 = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{\"city\": \"Paris\"}", "status": "completed"}
CALL_2 = {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "time", "arguments": "{}", "status": "completed"}
PATCH = {"type": "custom_tool_call", "id": "ctc_3", "call_id": "call_3", "name": "apply_patch", "input": "*** Begin Patch"}
LOCAL_SHELL = {"type": "local_shell_call", "call_id": "call_7", "action": {"type": "exec", "command": ["ls"]}, "status": "completed"}
TURN = {"dialect": "responses", "ids": ["call_1", "call_2", "resp_1"], "response_id": "resp_1", "items": [REASONING, CALL_1, CALL_2]}


def served() -> ServerState:
    """A server that answered the first question with TURN's items (and stored them)."""
    state = ServerState()
    state.remember("resp_1", [USER], TURN["items"])
    state.remember("resp_2", [USER], [PATCH])
    return state


def output(call_id: str, text: str = "18C", kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "output": text}


def recalled_by_ids(*turns: dict) -> dict[str, dict]:
    return {key: turn for turn in turns for key in turn["ids"]}


def repaired(body: dict, recalled: dict | None = None, profile=OPENAI, policy: Policy = Policy()) -> Result | None:
    planned = RESPONSES.plan(body, profile)
    if planned is None:
        return None
    return planned.repair({key: turn for key, turn in (recalled or {}).items() if key in planned.recall}, policy)


def untouched(body: dict, profile=OPENAI) -> bool:
    """Forwarded as the client's bytes: no plan, or a plan whose look in memory found nothing to change."""
    result = repaired(body, {}, profile)
    return result is None or result.findings == ()


def body_of(items: list, **fields: Any) -> dict:
    return {"model": "gpt-5", **fields, "input": items}


@pytest.mark.parametrize("doc", DOCS, ids=[doc.code for doc in DOCS])
def test_example_repairs_to_good(doc: RuleDoc) -> None:
    result = repaired(body_of(doc.bad, **doc.request), recalled_by_ids(*doc.recalled))
    assert result is not None and result.rejected is None
    assert doc.code in {finding.code for finding in result.findings}
    assert result.body["input"] == doc.good


@pytest.mark.parametrize("doc", [d for d in DOCS if not d.recalled], ids=lambda d: d.code)
def test_bad_example_is_rejected_and_good_accepted_by_a_strict_server(doc: RuleDoc) -> None:
    state = ServerState()
    # The server made the items the examples carry with server ids (each reasoning item with what followed it).
    state.remember("resp_0", [], [item for item in doc.good if "id" in item])
    assert violations(body_of(doc.bad, **doc.request), state)
    assert violations(body_of(doc.good, **doc.request), state) == []


def test_a_valid_history_needs_no_plan_and_chained_requests_only_look_in_memory() -> None:
    history = [USER, REASONING, CALL_1, CALL_2, output("call_1"), {"role": "user", "content": "and?"}, output("call_2")]
    assert untouched(body_of(history))  # OpenAI takes an output anywhere after its call
    assert violations(body_of(history), served()) == []
    planned = RESPONSES.plan(body_of([output("call_1")], previous_response_id="resp_0"), OPENAI)
    assert planned is not None and planned.recall == ["resp_0", "call_1"]  # the previous response, and the call it may hold
    assert planned.repair({}, Policy()).findings == ()  # nothing remembered: forwarded as sent


def test_orphan_output_gets_its_call_back_with_the_reasoning_it_came_with_byte_for_byte() -> None:
    body = body_of([USER, output("call_1"), output("call_2", "12:00")])
    result = repaired(body, recalled_by_ids(TURN))
    assert result is not None
    assert result.body["input"] == [USER, REASONING, CALL_1, CALL_2, output("call_1"), output("call_2", "12:00")]
    assert orjson.dumps(result.body["input"][1]) == orjson.dumps(REASONING)
    assert [(f.code, f.index, f.source, f.calls) for f in result.findings] == [("TM101", 1, "recalled", 2)]
    assert violations(body, served()) and violations(result.body, served()) == []


def test_unknown_orphan_follows_the_policy_with_a_call_of_its_own_family() -> None:
    body = body_of([USER, output("call_9", "patched", "custom_tool_call_output")])
    synthesized = repaired(body, {})
    assert synthesized is not None
    assert synthesized.body["input"][1] == {"type": "custom_tool_call", "call_id": "call_9", "name": "unknown_tool", "input": ""}
    dropped = repaired(body, {}, policy=Policy(orphans="drop"))
    assert dropped is not None and dropped.body["input"] == [USER]
    rejected = repaired(body, {}, policy=Policy(orphans="reject"))
    assert rejected is not None and rejected.rejected is not None and rejected.rejected.index == 1
    response = RESPONSES.rejection(rejected.rejected)
    assert response.status_code == 400 and orjson.loads(response.body)["error"]["param"] == "input[1]"


def test_unanswered_calls_get_a_placeholder_of_their_family_after_their_outputs() -> None:
    result = repaired(body_of([USER, REASONING, CALL_1, PATCH, output("call_1")]))
    assert result is not None
    assert result.body["input"][-1] == output("call_3", DEFAULT_PLACEHOLDER, "custom_tool_call_output")
    assert [f.code for f in result.findings] == ["TM104"]
    assert violations(result.body, served()) == []


def test_where_outputs_may_stand_is_the_profile_s_business() -> None:
    note = {"role": "developer", "content": "hook: tests passed"}
    history = [USER, CALL_1, note, output("call_1")]
    assert untouched(body_of(history), OPENAI)
    assert violations(body_of(history), served(), profile="deepseek")  # RS-17
    strict = repaired(body_of(history), profile=STRICT)
    assert strict is not None and strict.body["input"] == [USER, CALL_1, output("call_1"), note]
    assert violations(strict.body, served(), profile="deepseek") == []
    early = repaired(body_of([USER, output("call_1"), CALL_1]), profile=OPENAI)  # an output before its call moves either way
    assert early is not None and early.body["input"] == [USER, CALL_1, output("call_1")]


def test_untouched_items_are_the_client_s_own_objects_and_unknown_types_pass() -> None:
    unknown = {"type": "additional_tools", "role": "developer", "tools": [{"type": "function", "name": "x"}], "phase": "commentary"}
    body = body_of([unknown, USER, output("call_1")])
    result = repaired(body, recalled_by_ids(TURN))
    assert result is not None
    assert result.body["input"][0] is unknown and result.body["input"][1] is USER


def test_a_repaired_history_needs_no_second_repair() -> None:
    body = body_of([USER, output("call_1"), {"role": "user", "content": "and the time?"}], store=False)
    first = repaired(body, recalled_by_ids(TURN))
    assert first is not None and first.findings
    again = repaired(first.body, recalled_by_ids(TURN))
    assert again is None or again.findings == ()


def test_long_call_ids_are_shortened_in_the_call_and_its_output_together() -> None:
    long_id = "call_" + "x" * 70 + "|fc_1"
    call = {**CALL_1, "call_id": long_id, "id": "fc_1"}
    result = repaired(body_of([USER, call, output(long_id)]))
    assert result is not None
    new_call, new_output = result.body["input"][1:]
    assert new_call["call_id"] == new_output["call_id"] and len(new_call["call_id"]) <= 64
    assert violations(body_of([USER, call, output(long_id)]))
    assert "TM208" in {f.code for f in result.findings}


def test_a_call_resent_twice_with_previous_response_id_is_dropped_and_its_output_kept() -> None:
    """Found by tests/unit/dialects/test_fuzz.py: TM401 ran after the structural rules, which had renamed the second
    copy (TM107) and given it the output; dropping both copies left an output of ``call_1_2``, a call nobody had
    (RS-3), and the adjacent profiles an output between a call and its own."""
    body = {"previous_response_id": "resp_1", "input": [CALL_1, CALL_1, output("call_1")]}
    for profile in (OPENAI, STRICT):
        result = repaired(body, recalled_by_ids(TURN), profile)
        assert result is not None and result.body["input"] == [output("call_2", DEFAULT_PLACEHOLDER), output("call_1")]
        assert violations(result.body, served()) == [] and repaired(result.body, recalled_by_ids(TURN), profile).findings == ()


def test_an_item_that_only_shares_an_id_with_the_previous_response_keeps_its_content() -> None:
    """Not what the server holds, so not dropped; its id is the server's, so deleted (RS-9). An id that is a list
    is the server's to refuse: it raised TypeError (unhashable) in TM401."""
    body = {"previous_response_id": "resp_1", "input": [{**CALL_1, "call_id": "call_9"}, output("call_9")]}
    result = repaired(body, recalled_by_ids(TURN))
    new_call = {key: value for key, value in CALL_1.items() if key != "id"} | {"call_id": "call_9"}
    assert result is not None and result.body["input"] == [output("call_1", DEFAULT_PLACEHOLDER), output("call_2", DEFAULT_PLACEHOLDER),
                                                           new_call, output("call_9")]
    odd = {"previous_response_id": "resp_1", "input": [{**CALL_1, "id": []}, output("call_1")]}
    assert repaired(odd, recalled_by_ids(TURN)) is not None


@pytest.mark.parametrize("body", [
    {"store": False, "input": [LOCAL_SHELL, {"type": "local_shell_call_output", "id": "call_7", "output": "ok"}]},
    {"input": [{**LOCAL_SHELL, "id": "call_7"}, {"type": "local_shell_call_output", "id": "call_7", "output": "ok"}]},
    {"input": [{**LOCAL_SHELL, "call_id": "call 7"}, {"type": "local_shell_call_output", "id": "call 7", "output": "ok"}]},
], ids=["store-false", "id-shared-with-its-call", "odd-characters"])
def test_a_local_shell_output_keeps_the_id_that_names_its_call(body: dict) -> None:
    """Found by tests/unit/dialects/test_fuzz.py: TM407, TM403 and TM404 deleted it like any item id, and the output
    answered nothing (the next repair gave it a made-up call)."""
    result = repaired(body)
    assert result is None or result.findings == ()


def test_two_outputs_for_one_call_get_a_plan_and_are_merged_into_one() -> None:
    body = body_of([USER, REASONING, CALL_1, output("call_1"), output("call_1", "19C")])
    assert RESPONSES.plan(body, OPENAI) is not None  # the fast path sees the second output (TM108)
    result = repaired(body)
    assert result is not None
    assert result.body["input"] == [USER, REASONING, CALL_1, output("call_1", "18C\n\n19C")]
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM108", 4, "removed")]


def test_two_identical_item_references_get_a_plan_and_the_copy_is_dropped() -> None:
    answer = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
              "content": [{"type": "output_text", "text": "Which city?", "annotations": []}]}
    state = ServerState()
    state.remember("resp_3", [USER], [answer])
    reference = {"type": "item_reference", "id": "msg_1"}
    then = {"role": "user", "content": "Paris."}
    body = body_of([USER, reference, dict(reference), then])
    assert RESPONSES.plan(body, OPENAI) is not None  # the fast path counts reference ids with the others (TM403)
    result = repaired(body)
    assert result is not None and result.body["input"] == [USER, reference, then]
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM403", 2, "removed")]
    assert [v.rule for v in violations(body, state)] == ["RS-9"] and violations(result.body, state) == []
    assert untouched(body_of([USER, reference, then]))


def test_an_id_with_the_type_s_letters_but_not_its_prefix_is_deleted_and_so_are_the_ids_of_what_its_reasoning_made() -> None:
    odd_call = {**CALL_1, "id": "fcall_1"}  # "fc" without the underscore: not an id the server makes
    result = repaired(body_of([USER, odd_call, output("call_1")]))
    assert result is not None and result.body["input"][1] == {k: v for k, v in CALL_1.items() if k != "id"}
    # A reasoning item whose id is deleted, a call of its run with a bad id too, and then one with a good id: all three
    # lose their ids (the server would tie the good one to a reasoning item it can no longer find).
    bad_reasoning = {**REASONING, "id": "reasoning-1"}
    body = body_of([USER, bad_reasoning, {**CALL_1, "id": "call-1"}, CALL_2, output("call_1"), output("call_2")])
    result = repaired(body)
    assert result is not None
    assert ["id" in item for item in result.body["input"][1:4]] == [False, False, False]


def test_of_identical_copies_of_an_item_other_than_reasoning_the_first_is_kept_wherever_it_stands() -> None:
    answer = {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Which city?"}]}
    then = {"role": "user", "content": "Paris, and the time."}
    result = repaired(body_of([USER, answer, then, dict(answer), CALL_2, output("call_2")]))
    assert result is not None and result.body["input"] == [USER, answer, then, CALL_2, output("call_2")]
    assert [(f.code, f.index) for f in result.findings] == [("TM403", 3)]
