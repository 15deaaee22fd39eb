"""The engine's behaviour beyond the docstring examples: policies, memory, grouping, indexes, purity."""

import copy

import pytest

from proxy.config import Settings
from proxy.repair import DEFAULT_PLACEHOLDER, Policy, orphan_call_ids, repair
from proxy.repair.findings import calls_by_source, summarize_calls
from tests.support.proxy_fixtures import running_proxy
from tests.support.strict_upstream import Recorder
from tests.support.strict_validator import violations

USER = {"role": "user", "content": "Weather in Paris and Rome?"}


def call(cid: str, name: str = "weather", arguments: str = '{"city": "Paris"}', **extra) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}, **extra}


def result(cid: str, content: str = "18C", **extra) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": content, **extra}


def turn(*calls: dict, content=None) -> dict:
    return {"tool_calls": list(calls), "content": content, "reasoning_content": None}


def memory(*turns: dict) -> dict:
    return {c["id"]: t for t in turns for c in t["tool_calls"]}


def fix(messages: list, recalled: dict | None = None, **policy) -> tuple[list, list]:
    result = repair({"messages": messages}, recalled or {}, policy=Policy(**policy))
    if result.rejected is None:
        assert violations(result.body, skip=("S12",)) == []
    return result.body["messages"], list(result.findings)


def test_orphans_of_one_turn_get_one_assistant_message_with_exact_calls() -> None:
    gemini = call("c1", extra_content={"google": {"thought_signature": "sig=="}})
    remembered = turn(gemini, call("c2", arguments='{"city":"Rome"}'))
    messages, findings = fix([USER, result("c1"), result("c2", "24C")], memory(remembered))
    assert messages == [USER, {"role": "assistant", "content": None, "tool_calls": remembered["tool_calls"]},
                        result("c1"), result("c2", "24C")]
    assert [(f.code, f.index, f.action) for f in findings] == [("TM101", 1, "inserted")]


def test_orphans_of_two_turns_get_two_assistant_messages() -> None:
    first, second = turn(call("a1")), turn(call("b1", name="time"))
    messages, _ = fix([USER, result("a1"), result("b1")], memory(first, second))
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert messages[3]["tool_calls"] == second["tool_calls"]


def test_remembered_call_without_result_gets_a_placeholder() -> None:
    messages, findings = fix([USER, result("c1")], memory(turn(call("c1"), call("c2"))))
    assert messages[-1] == {"role": "tool", "tool_call_id": "c2", "content": DEFAULT_PLACEHOLDER}
    assert [f.code for f in findings] == ["TM101", "TM104"]


def test_kept_text_gets_the_calls_attached() -> None:
    text = {"role": "assistant", "content": "Checking both."}
    messages, findings = fix([USER, text, result("c1")], memory(turn(call("c1"))))
    assert messages[1] == {"role": "assistant", "content": "Checking both.", "tool_calls": [call("c1")]}
    assert findings[0].action == "attached"


def test_partially_kept_turn_is_restored_in_order() -> None:
    kept = {"role": "assistant", "content": None, "tool_calls": [call("c2", arguments='{"city":"Rome"}')]}
    full = turn(call("c1"), call("c2", arguments='{"city":"Rome"}'))
    messages, _ = fix([USER, kept, result("c2"), result("c1")], memory(full))
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["c1", "c2"]
    assert {m["tool_call_id"] for m in messages[2:]} == {"c1", "c2"}


def test_memory_is_never_aliased() -> None:
    remembered = turn(call("c1"))
    snapshot = copy.deepcopy(remembered)
    messages, _ = fix([USER, result("c1")], memory(remembered))
    messages[1]["tool_calls"][0]["id"] = "changed"
    assert remembered == snapshot


@pytest.mark.parametrize(
    ("orphan", "tools", "expected"),
    [
        (result("c1", name="lookup"), None, "lookup"),
        (result("c1"), [{"type": "function", "function": {"name": "only_tool"}}], "only_tool"),
        (result("c1"), [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}], "unknown_tool"),
    ],
)
def test_synthesized_name(orphan: dict, tools, expected: str) -> None:
    body = {"messages": [USER, orphan], "tools": tools}
    result_ = repair(body)
    assert result_.body["messages"][1]["tool_calls"] == [call("c1", name=expected, arguments="{}")]
    assert result_.findings[0].action == "synthesized"


def test_consecutive_unknown_orphans_share_one_synthesized_turn() -> None:
    messages, findings = fix([USER, result("x1"), result("x2")])
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["x1", "x2"] and len(messages) == 4
    assert [f.index for f in findings] == [1, 2]


def test_drop_policy_removes_unknown_orphans_only() -> None:
    messages, findings = fix([USER, result("x1"), result("c1")], memory(turn(call("c1"))), orphans="drop")
    assert result("x1") not in messages and result("c1") in messages
    assert [(f.code, f.index, f.action) for f in findings] == [("TM101", 1, "removed"), ("TM101", 2, "inserted")]


def test_reject_policy_names_index_and_forwards_nothing() -> None:
    body = {"messages": [USER, {"role": "assistant", "content": "hi"}, result("x1")]}
    outcome = repair(body, policy=Policy(orphans="reject"))
    assert outcome.rejected is not None and outcome.rejected.index == 2 and outcome.rejected.code == "TM101"
    assert outcome.body is body and not outcome.changed


def test_findings_point_at_the_clients_indexes_after_insertions() -> None:
    messages = [USER, result("x1"), {"role": "user", "content": "next"}, {"role": "assistant", "content": None}]
    _, findings = fix(messages)
    assert [(f.code, f.index) for f in findings] == [("TM101", 1), ("TM109", 3)]


def test_input_is_never_mutated() -> None:
    body = {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": {"a": 1}}}]}]}
    snapshot = copy.deepcopy(body)
    assert repair(body).changed
    assert body == snapshot


def test_nameless_result_with_ambiguous_name_becomes_an_orphan() -> None:
    calls = {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]}
    messages, findings = fix([USER, calls, {"role": "tool", "name": "weather", "content": "18C"}])
    assert findings[0].code == "TM106" and findings[0].action == "added"
    assert all(m["role"] != "tool" or m["tool_call_id"] for m in messages)


def test_two_different_real_results_are_merged_not_lost() -> None:
    calls = {"role": "assistant", "content": None, "tool_calls": [call("c1")]}
    messages, findings = fix([USER, calls, result("c1", "first"), result("c1", "second")])
    assert messages[2]["content"] == "first\n\nsecond" and len(messages) == 3
    assert findings[0].code == "TM108"


def test_custom_tool_calls_are_not_touched() -> None:
    custom = {"id": "c1", "type": "custom", "custom": {"name": "grammar", "input": "x"}}
    body = {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [custom]}, result("c1")]}
    assert repair(body).findings == ()


def test_orphan_call_ids_lists_only_undeclared_results() -> None:
    calls = {"role": "assistant", "content": None, "tool_calls": [call("c1")]}
    assert orphan_call_ids([USER, calls, result("c1"), result("x1"), result("x1"), result("x2")]) == ["x1", "x2"]
    assert orphan_call_ids("not a list") == []


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="orphan policy"):
        Policy(orphans="ignore")


@pytest.mark.parametrize("policy", ["synthesize", "drop", "reject"])
def test_split_turn_restored_from_memory_declares_each_call_once(policy: str) -> None:
    # Issue 15: a parallel turn stored as [c0], [], [c2, c3] with c1's call lost; memory restores the turn.
    calls = [call(f"c{n}", arguments=f'{{"n": {n}}}') for n in range(4)]
    parts = [{"role": "assistant", "content": None, "tool_calls": part} for part in ([calls[0]], [], calls[2:])]
    results = [result(f"c{n}", f"{n}C") for n in range(4)]
    messages, findings = fix([USER, *parts, *results], memory(turn(*calls)), orphans=policy)
    assert messages == [USER, {"role": "assistant", "content": None, "tool_calls": calls}, *results]
    assert [f.code for f in findings if f.code == "TM101"] == ["TM101"]


# --- where re-inserted calls came from (issue 14 item 2) -----------------------------------------------


def sources(findings: list) -> list[tuple[str, str | None, int]]:
    return [(f.action, f.source, f.calls) for f in findings if f.code == "TM101"]


def test_a_remembered_parallel_turn_counts_each_of_its_calls_as_recalled() -> None:
    # One finding restores the whole turn: three calls, one of whose results the client lost too (TM104).
    _, findings = fix([USER, result("c1"), result("c2")], memory(turn(call("c1"), call("c2"), call("c3"))))
    assert sources(findings) == [("inserted", "recalled", 3)]
    assert calls_by_source(findings) == {"recalled": 3}


def test_calls_attached_to_kept_text_are_recalled() -> None:
    _, findings = fix([USER, {"role": "assistant", "content": "Checking."}, result("c1")], memory(turn(call("c1"))))
    assert sources(findings) == [("attached", "recalled", 1)]


def test_a_partially_kept_turn_counts_only_the_calls_memory_put_back() -> None:
    kept = {"role": "assistant", "content": None, "tool_calls": [call("c2")]}
    _, findings = fix([USER, kept, result("c2"), result("c1"), result("c3")], memory(turn(call("c1"), call("c2"), call("c3"))))
    assert sources(findings) == [("restored", "recalled", 2)]


def test_each_synthesized_call_counts_once_even_when_they_share_a_turn() -> None:
    _, findings = fix([USER, {"role": "assistant", "content": "hm"}, result("x1"), result("x2")])
    assert sources(findings) == [("synthesized", "synthesized", 1), ("synthesized", "synthesized", 1)]
    assert calls_by_source(findings) == {"synthesized": 2}


def test_recalled_and_synthesized_calls_in_one_history_are_told_apart() -> None:
    messages = [USER, result("c1"), {"role": "user", "content": "and now?"}, result("x1")]
    _, findings = fix(messages, memory(turn(call("c1"), call("c2"))))
    assert sources(findings) == [("inserted", "recalled", 2), ("synthesized", "synthesized", 1)]
    assert summarize_calls(calls_by_source(findings)) == "recalled=2,synthesized=1"


@pytest.mark.parametrize("policy", ["drop", "reject"])
def test_dropped_or_rejected_orphans_put_no_call_back(policy: str) -> None:
    outcome = repair({"messages": [USER, {"role": "assistant", "content": "hm"}, result("x1")]}, policy=Policy(orphans=policy))
    assert [(f.source, f.calls) for f in outcome.findings] == [(None, 0)]
    assert calls_by_source(outcome.findings) == {}


def test_findings_of_other_rules_carry_no_calls() -> None:
    # An unanswered call gets a placeholder result (TM104), not a call.
    _, findings = fix([USER, {"role": "assistant", "content": None, "tool_calls": [call("c1")]}, {"role": "user", "content": "?"}])
    assert [(f.code, f.source, f.calls) for f in findings] == [("TM104", None, 0)]


@pytest.mark.parametrize(
    ("messages", "policy"),
    [
        # Issue 15: TM204 empties the call list, TM101 drops the unknown result, TM109 the empty assistant.
        ([{"role": "assistant", "content": None, "tool_calls": []}, result("call_0", "x")], "drop"),
        ([result("x1"), result("x2")], "drop"),
        ([{"role": "assistant", "content": None}], "synthesize"),
        ([{"role": "assistant", "content": ""}, {"role": "assistant", "content": []}], "reject"),
    ],
)
def test_a_repair_that_would_leave_no_message_rejects_the_request(messages: list, policy: str) -> None:
    body = {"model": "gpt-4o", "messages": messages}
    snapshot = copy.deepcopy(body)
    outcome = repair(body, policy=Policy(orphans=policy))
    assert outcome.rejected is not None and outcome.rejected.code == "TM210" and outcome.rejected.index == 0
    assert outcome.rejected in outcome.findings and outcome.body is body and not outcome.changed
    assert body == snapshot


async def test_the_proxy_answers_400_and_forwards_nothing_when_a_repair_would_leave_no_message(
    strict_upstream: tuple[str, Recorder],
) -> None:
    url, recorder = strict_upstream
    recorder.reset()
    messages = [{"role": "assistant", "content": None, "tool_calls": []}, result("call_0", "x")]
    async with running_proxy(Settings(upstream=url + "/v1", orphan_policy="drop")) as proxy:
        response = await proxy.client.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": messages})
    assert response.status_code == 400 and not recorder.requests
    error = response.json()["error"]
    assert error["code"] == "toolmend_empty_history" and error["param"] == "messages.[0]"
    assert "TM204, TM101, TM109" in error["message"]


def test_a_message_made_after_one_was_deleted_never_takes_the_deleted_one_s_position() -> None:
    # Findings locate messages by identity: a freed message's id can be handed to the next dict made, which then
    # inherited its position (found by a differential fuzz: TM301 reported at the wrong index).
    from proxy.repair.context import Context
    from proxy.repair.profiles import get_profile

    ctx = Context([{"role": "user", "content": str(n)} for n in range(50)], None, {}, Policy(), get_profile("openai"))
    del ctx.messages[:]
    made = [{"role": "tool", "content": str(n)} for n in range(50)]
    assert [ctx.index_of(message, -1) for message in made] == [-1] * 50
