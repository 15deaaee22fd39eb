"""The Messages dialect's repairs: each rule's docstring example, and the structural rules over the view.

A rule's Bad history, repaired with its Recalled turns and its Request fields, must become exactly its Good
history; the strict Messages validator rejects Bad and accepts Good (with the thinking blocks of Good minted by
the server). The view tests show what the shared structural rules do to Anthropic histories: a dropped turn put
back with its thinking byte for byte, placeholders first in the next user message, results moved in front of
text, and that whatever no rule touched is the very object the client sent.
"""

from typing import Any

import orjson
import pytest

from proxy.dialects.messages import MESSAGES
from proxy.dialects.messages.errors import anthropic_error
from proxy.dialects.messages.rules import RULES
from proxy.dialects.messages.surrogates import mend
from proxy.repair import DEFAULT_PLACEHOLDER, Policy, Result
from proxy.repair.catalog import RuleDoc, describe
from tests.support.messages_validator import ServerState, check, violations

DOCS = [describe(rule) for rule in RULES]
ANTHROPIC = MESSAGES.profile("anthropic")
COMPATIBLE = MESSAGES.profile("deepseek")
ZAI = MESSAGES.profile("zai")
#: The route profile each example runs under (and the strict server judging it): Anthropic's, unless only the
#: compatible servers' profiles carry the rule.
SERVER = {doc.code: "deepseek" for doc in DOCS if any(rule.RULE.code == doc.code for rule in COMPATIBLE.rules)}
MANUAL = {"type": "enabled", "budget_tokens": 1024}

Q = {"role": "user", "content": "Weather in Paris, and the time?"}
THINK = {"type": "thinking", "thinking": "Two lookups: weather, then time.", "signature": "EqQBCkgIARABGAIiQLsig1"}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
SAY = {"type": "text", "text": "Let me check."}
USE_A = {"type": "tool_use", "id": "toolu_01A", "name": "weather", "input": {"city": "Paris"}, "caller": {"type": "direct"}}
USE_B = {"type": "tool_use", "id": "toolu_01B", "name": "time", "input": {}}
ALONE = {"type": "thinking", "thinking": "Just the weather.", "signature": "EqQBCkgIARABGAIiQLsig2"}  # an answer's only thinking
TURN = {"dialect": "messages", "ids": ["toolu_01A", "toolu_01B"], "message_id": "msg_01", "blocks": [THINK, REDACTED, SAY, USE_A, USE_B]}


def answer(call_id: str, content: Any = "18C", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


#: An earlier answer: thinking and one call.
OTHER = {"dialect": "messages", "ids": ["toolu_02"], "message_id": "msg_02", "blocks": [ALONE, {**USE_B, "id": "toolu_02"}]}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
RESULTS = user(answer("toolu_01A"), answer("toolu_01B", "12:00"))
CALLS = assistant(THINK, REDACTED, SAY, USE_A, USE_B)


def body_of(*messages: Any, **fields: Any) -> dict[str, Any]:
    return {"model": "claude-strict-test", "max_tokens": 2048, **fields, "messages": list(messages)}


def recalled_by_ids(*turns: dict) -> dict[str, dict]:
    return {key: turn for turn in turns for key in turn["ids"]}


def served(*contents: list[Any]) -> ServerState:
    """A server that answered with these contents (and minted their thinking blocks), TURN's and ALONE's first."""
    state = ServerState()
    for content in (TURN["blocks"], [ALONE], *contents):
        state.mint(content)
    return state


DEFAULT = Policy()


def repaired(body: dict, recalled: dict | None = None, profile=ANTHROPIC, policy: Policy = DEFAULT) -> Result | None:
    planned = MESSAGES.plan(body, profile)
    if planned is None:
        return None
    return planned.repair({key: turn for key, turn in (recalled or {}).items() if key in planned.recall}, policy)


def fixed(body: dict, recalled: dict | None = None, **kwargs: Any) -> dict:
    result = repaired(body, recalled, **kwargs)
    assert result is not None and result.rejected is None and result.findings
    return result.body


def untouched(body: dict, profile=ANTHROPIC) -> bool:
    """Forwarded as the client's bytes: no plan, or a plan whose look in memory found nothing to change."""
    result = repaired(body, {}, profile)
    return result is None or result.findings == ()


# --- every rule's example -----------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=[doc.code for doc in DOCS])
def test_example_repairs_to_good(doc: RuleDoc) -> None:
    profile = MESSAGES.profile(SERVER.get(doc.code, "anthropic"))
    result = repaired(body_of(*doc.bad, **doc.request), recalled_by_ids(*doc.recalled), profile)
    assert result is not None and result.rejected is None
    assert doc.code in {finding.code for finding in result.findings}
    assert result.body["messages"] == doc.good


@pytest.mark.parametrize("doc", DOCS, ids=[doc.code for doc in DOCS])
def test_bad_example_is_rejected_and_good_accepted_by_a_strict_server(doc: RuleDoc) -> None:
    state = ServerState()  # the server made the thinking the examples carry
    for content in [turn["blocks"] for turn in doc.recalled] + [m["content"] for m in doc.good if m["role"] == "assistant"]:
        state.mint(content)
    server = SERVER.get(doc.code, "anthropic")
    assert violations(body_of(*doc.bad, **doc.request), profile=server, state=state)
    assert violations(body_of(*doc.good, **doc.request), profile=server, state=state) == []


@pytest.mark.parametrize("doc", DOCS, ids=[doc.code for doc in DOCS])
def test_a_good_example_needs_no_repair(doc: RuleDoc) -> None:
    assert untouched(body_of(*doc.good, **doc.request), MESSAGES.profile(SERVER.get(doc.code, "anthropic")))


# --- the fast check -----------------------------------------------------------------------------------------

VALID = [
    body_of(Q, CALLS, RESULTS, thinking=MANUAL),
    body_of(Q, CALLS, RESULTS, assistant(text("18C and noon.")), user(text("Thanks")), thinking=MANUAL),
    body_of(Q, CALLS, user(answer("toolu_01A")), user(answer("toolu_01B"), text("go on")), thinking=MANUAL),  # one turn, two messages
    body_of(Q, assistant(SAY, USE_A), user(answer("toolu_01A", [text("18C"), IMAGE]))),
    body_of(Q, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Hi"}),
    body_of(Q, assistant(ALONE, {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "Paris"}},
                         {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []}, SAY, USE_A), user(answer("toolu_01A")),
            thinking={"type": "adaptive"}),
    body_of(Q, assistant(USE_A), user(answer("toolu_01A")), thinking={"type": "adaptive"}),  # adaptive thinking is not held to AM-9
    body_of(Q, assistant(SAY)),  # a prefill
]


@pytest.mark.parametrize("body", VALID)
def test_valid_histories_need_no_plan(body: dict) -> None:
    """No plan, or, when the latest assistant message holds signed thinking and calls, one that only looks up those
    calls (memory tells whether the client altered that thinking, AM-13) and changes nothing when memory agrees."""
    planned = MESSAGES.plan(body, ANTHROPIC)
    latest = next(m for m in reversed(body["messages"]) if m["role"] == "assistant")
    if planned is not None:
        assert any(block.get("signature") for block in latest["content"] if isinstance(block, dict))
        assert planned.recall == [block["id"] for block in latest["content"] if block.get("type") == "tool_use"]
        assert planned.repair(recalled_by_ids(TURN), DEFAULT).findings == ()
    assert violations(body, state=served()) == []


def test_a_final_tool_turn_without_thinking_asks_memory_for_its_calls() -> None:
    planned = MESSAGES.plan(body_of(Q, assistant(SAY, USE_A, USE_B), RESULTS, thinking=MANUAL), ANTHROPIC)
    assert planned is not None and planned.recall == ["toolu_01A", "toolu_01B"]
    orphans = MESSAGES.plan(body_of(Q, user(answer("toolu_01A"), answer("toolu_9"))), ANTHROPIC)
    assert orphans is not None and orphans.recall == ["toolu_01A", "toolu_9"]


# --- the view: calls put back, results placed ---------------------------------------------------------------


def test_orphan_results_get_their_turn_back_with_its_thinking_byte_for_byte() -> None:
    body = body_of(Q, RESULTS, thinking=MANUAL)
    result = repaired(body, recalled_by_ids(TURN))
    assert result is not None
    messages = result.body["messages"]
    assert messages == [Q, assistant(*TURN["blocks"]), RESULTS]
    assert orjson.dumps(messages[1]["content"]) == orjson.dumps(TURN["blocks"])
    assert messages[2] is RESULTS
    assert [(f.code, f.index, f.source, f.calls) for f in result.findings] == [("TM101", 1, "recalled", 2)]
    assert violations(body, state=served()) and violations(result.body, state=served()) == []


def test_with_thinking_off_the_remembered_thinking_is_left_out_and_said_so() -> None:
    body = body_of(Q, RESULTS)
    result = repaired(body, recalled_by_ids(TURN))
    assert result is not None
    assert result.body["messages"][1] == assistant(SAY, USE_A, USE_B)
    assert [(f.code, f.action) for f in result.findings] == [("TM101", "inserted"), ("TM511", "removed")]
    assert violations(result.body, state=served()) == []


@pytest.mark.parametrize("kept", [assistant(SAY), {"role": "assistant", "content": "Let me check."}, assistant(THINK, SAY)])
def test_calls_attached_to_the_message_the_client_kept_add_only_what_it_lacks_thinking_first(kept: dict) -> None:
    body = body_of(Q, kept, RESULTS, thinking=MANUAL)
    result = repaired(body, recalled_by_ids(TURN))
    assert result is not None
    assert result.body["messages"] == [Q, assistant(THINK, REDACTED, SAY, USE_A, USE_B), RESULTS]
    assert [(f.code, f.action, f.index) for f in result.findings] == [("TM101", "attached", 2)]
    assert violations(result.body, state=served()) == []


def test_unknown_orphan_follows_the_orphan_policy() -> None:
    body = body_of(Q, user(answer("toolu_9"), text("and?")))
    synthesized = fixed(body)
    assert synthesized["messages"][1] == assistant({"type": "tool_use", "id": "toolu_9", "name": "unknown_tool", "input": {}})
    assert violations(synthesized) == []
    assert fixed(body, policy=Policy(orphans="drop"))["messages"] == [Q, user(text("and?"))]
    rejected = repaired(body, {}, policy=Policy(orphans="reject"))
    assert rejected is not None and rejected.rejected is not None and rejected.rejected.index == 1
    response = MESSAGES.rejection(rejected.rejected)
    error = orjson.loads(response.body)
    assert response.status_code == 400 and error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith("toolmend TM101 (orphan-tool-message) at messages.1: ")


def test_unanswered_calls_get_error_results_first_in_the_next_user_message() -> None:
    placeholder = answer("toolu_01A", DEFAULT_PLACEHOLDER, is_error=True)
    cancelled = body_of(Q, CALLS, {"role": "user", "content": "Never mind, just say hi."}, thinking=MANUAL)
    assert fixed(cancelled)["messages"][2] == user(placeholder, answer("toolu_01B", DEFAULT_PLACEHOLDER, is_error=True),
                                                   text("Never mind, just say hi."))
    cut_off = fixed(body_of(Q, CALLS, thinking=MANUAL))  # the history ends with the calls: the user message is made
    assert cut_off["messages"][2] == user(placeholder, answer("toolu_01B", DEFAULT_PLACEHOLDER, is_error=True))
    partial = fixed(body_of(Q, CALLS, user(answer("toolu_01B", "12:00")), thinking=MANUAL))
    assert partial["messages"][2] == user(answer("toolu_01B", "12:00"), placeholder)
    for repaired_body in (fixed(cancelled), cut_off, partial):
        assert repaired_body["messages"][1] is CALLS
        assert violations(repaired_body, state=served()) == []


def test_text_before_the_results_moves_after_them() -> None:
    note, reminder = text("Here are the results."), user(text("Still waiting?"))
    inline = fixed(body_of(Q, CALLS, user(note, answer("toolu_01A"), answer("toolu_01B")), thinking=MANUAL))
    assert inline["messages"][2] == user(answer("toolu_01A"), answer("toolu_01B"), note)
    separate = fixed(body_of(Q, CALLS, reminder, RESULTS, thinking=MANUAL))  # the results in a later user message
    assert separate["messages"] == [Q, CALLS, RESULTS, reminder]
    assert separate["messages"][2] is RESULTS and separate["messages"][3] is reminder
    for repaired_body in (inline, separate):
        assert violations(repaired_body, state=served()) == []


def test_a_turn_split_over_two_assistant_messages_is_merged_with_its_thinking_in_front() -> None:
    body = body_of(Q, assistant(THINK, REDACTED, SAY, USE_A), assistant(USE_B), RESULTS, thinking=MANUAL)
    result = fixed(body)
    assert result["messages"] == [Q, CALLS, RESULTS]
    assert violations(result, state=served()) == []


def test_two_answers_whose_results_between_were_lost_are_not_merged() -> None:
    second = assistant(ALONE, {**USE_B, "id": "toolu_02"})  # an answer of its own: it opens with its thinking
    body = body_of(Q, CALLS, second, user(answer("toolu_02")), thinking=MANUAL)
    messages = fixed(body)["messages"]
    placeholders = [answer(cid, DEFAULT_PLACEHOLDER, is_error=True) for cid in ("toolu_01A", "toolu_01B")]
    assert messages == [Q, CALLS, user(*placeholders), second, body["messages"][3]]
    assert messages[1] is CALLS and messages[3] is second
    assert violations({**body, "messages": messages}, state=served()) == []


def test_duplicates_are_mended_in_calls_and_results_together() -> None:
    again = {**USE_A, "input": {"city": "Rome"}}
    body = body_of(Q, assistant(USE_A), user(answer("toolu_01A")), assistant(again), user(answer("toolu_01A", "24C"), answer("toolu_01A", "24C")))
    messages = fixed(body)["messages"]
    assert messages[3]["content"][0]["id"] == messages[4]["content"][0]["tool_use_id"] == "toolu_01A_2"
    assert len(messages[4]["content"]) == 1
    assert messages[:3] == body["messages"][:3] and messages[1] is body["messages"][1]
    assert violations(body) and violations({**body, "messages": messages}) == []


def test_a_renamed_id_in_the_latest_message_keeps_its_thinking_byte_for_byte() -> None:
    kimi_id = "functions.weather:0"
    blocks = [THINK, {**USE_A, "id": kimi_id}]
    body = body_of(Q, assistant(*blocks), user(answer(kimi_id)), thinking=MANUAL)
    messages = fixed(body)["messages"]
    assert messages[1]["content"][0] is THINK
    assert orjson.dumps(messages[1]["content"][0]) == orjson.dumps(THINK)
    assert messages[1]["content"][1]["id"] == messages[2]["content"][0]["tool_use_id"] == "functions_weather_0"
    assert violations({**body, "messages": messages}, state=served(blocks)) == []


def test_untouched_messages_are_the_client_s_own_objects() -> None:
    latest = assistant(ALONE, SAY, USE_A)
    body = body_of(Q, user(answer("toolu_02", "12:00")), user(text("and Paris?")), latest, user(answer("toolu_01A")), thinking=MANUAL)
    result = repaired(body, recalled_by_ids(OTHER))
    assert result is not None and result.findings
    messages = result.body["messages"]
    assert messages[0] is Q and messages[-2] is latest and messages[-1] is body["messages"][-1]
    assert body["messages"][1] == user(answer("toolu_02", "12:00"))  # the request itself is never edited
    assert violations(result.body, state=served()) == []


def test_unreadable_messages_stay_where_they_were() -> None:
    system = {"role": "system", "content": "Be brief."}
    body = body_of(Q, system, user(answer("toolu_9")))
    messages = fixed(body)["messages"]
    assert messages[0] is Q and messages[1] is system and messages[2]["role"] == "assistant"
    assert untouched(body_of(Q, system, CALLS, RESULTS, thinking=MANUAL))


# --- thinking -----------------------------------------------------------------------------------------------


def test_a_final_tool_turn_without_thinking_memory_lacks_follows_the_thinking_policy() -> None:
    body = body_of(Q, assistant(SAY, USE_A), user(answer("toolu_01A")), thinking=MANUAL)
    assert check(orjson.dumps(body)) is not None
    dropped = repaired(body, {}, policy=Policy(thinking="drop"))
    assert dropped is not None and dropped.rejected is None
    assert "thinking" not in dropped.body and dropped.body["messages"] == body["messages"]
    assert [(f.code, f.action) for f in dropped.findings] == [("TM510", "thinking-disabled")]
    assert "thinking" in body  # the client's body is left as sent
    assert violations(dropped.body) == []
    refused = repaired(body, {}, policy=Policy(thinking="reject"))
    assert refused is not None and refused.rejected is not None and refused.rejected.code == "TM510"
    error = orjson.loads(MESSAGES.rejection(refused.rejected).body)
    assert "at messages.1:" in error["error"]["message"]


def test_turning_thinking_off_also_removes_the_thinking_memory_brought_back() -> None:
    body = body_of(Q, user(answer("toolu_02")), user(text("and now?")), assistant(USE_B), user(answer("toolu_01B")), thinking=MANUAL)
    result = repaired(body, recalled_by_ids(OTHER))
    assert result is not None and "thinking" not in result.body
    assert not any(block["type"] == "thinking" for m in result.body["messages"] for block in m["content"] if type(block) is dict)
    assert [f.code for f in result.findings] == ["TM101", "TM510", "TM511"]
    assert violations(result.body) == []


def test_unsigned_thinking_is_kept_for_kimi_and_deepseek_and_removed_for_anthropic() -> None:
    for signature, server in (({"signature": ""}, "kimi"), ({}, "deepseek")):
        unsigned = {"type": "thinking", "thinking": "Weather first.", **signature}
        body = body_of(Q, assistant(unsigned, USE_A), user(answer("toolu_01A")), thinking=MANUAL)
        assert untouched(body, COMPATIBLE)
        assert violations(body, profile=server, state=ServerState()) == []
        stripped = repaired(body, {}, ANTHROPIC, Policy(thinking="drop"))
        assert stripped is not None
        assert [f.code for f in stripped.findings] == ["TM506", "TM510"]  # without it the tool turn has no thinking
        assert violations(stripped.body, state=ServerState()) == []


def test_route_profile_names_map_onto_three_messages_profiles() -> None:
    assert MESSAGES.profile("deepseek") is COMPATIBLE and MESSAGES.profile("zai") is ZAI
    assert {MESSAGES.profile(name).name for name in ("anthropic", "openai", "gemini", "anything")} == {"anthropic"}
    assert ANTHROPIC.adjacent_results and COMPATIBLE.adjacent_results and ZAI.adjacent_results


def test_a_repaired_history_needs_no_second_repair() -> None:
    bodies = [
        body_of(Q, RESULTS, user(text("and?")), thinking=MANUAL),
        body_of(Q, assistant(text(""), USE_A, text("done")), user(text("x"), answer("toolu_01A"), answer("toolu_01A"))),
        body_of(Q, assistant(ALONE, {**USE_A, "id": "a.b", "index": 0, "input": "{}"}), thinking={"type": "adaptive"}),
        body_of(Q, assistant(SAY, THINK), user(text("?")), assistant(USE_B), user(answer("toolu_01B")), thinking=MANUAL),
    ]
    for body in bodies:
        first = fixed(body, recalled_by_ids(TURN))
        assert violations(first, state=served()) == []
        assert untouched(first) or repaired(first, recalled_by_ids(TURN)).findings == ()  # type: ignore[union-attr]


# --- errors and the raw body --------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "kind"), [(400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
                                              (404, "not_found_error"), (413, "request_too_large"), (422, "invalid_request_error"),
                                              (429, "rate_limit_error"), (500, "api_error"), (502, "api_error"),
                                              (503, "overloaded_error"), (504, "timeout_error"), (529, "overloaded_error")])
def test_errors_are_anthropic_s_envelope_typed_by_status(status: int, kind: str) -> None:
    response = anthropic_error(status, "nope", "upstream_error", param="messages", code="x", headers={"retry-after": "1"})
    assert response.status_code == status and response.headers["retry-after"] == "1"
    assert orjson.loads(response.body) == {"type": "error", "error": {"type": kind, "message": "nope"}}


def test_lone_surrogates_are_replaced_so_the_body_parses() -> None:
    raw = orjson.dumps(body_of(Q, assistant(USE_A), user(answer("toolu_01A", "cut: XX"))))
    broken = raw.replace(b"XX", rb"\ud83d") + b" "
    with pytest.raises(orjson.JSONDecodeError, match="surrogate"):
        orjson.loads(broken)
    mended = mend(broken)
    assert mended is not None and mended[1] == 1 and len(mended[0]) == len(broken)
    assert orjson.loads(mended[0])["messages"][2]["content"][0]["content"] == "cut: \N{REPLACEMENT CHARACTER}"
    assert mend(raw) is None  # nothing to mend
    pair, escaped = rb'{"a": "\ud83d\ude00 \\ud800"}', rb'{"a": "\\\ude00"}'
    assert mend(pair) is None and orjson.loads(pair)["a"] == "\N{GRINNING FACE} \\ud800"
    assert mend(escaped) == (rb'{"a": "\\\ufffd"}', 1)
    assert mend(rb'"\udc00\ud800"') == (rb'"\ufffd\ufffd"', 2)


def test_a_synthesized_call_is_named_after_the_only_client_tool() -> None:
    tools = [{"name": "weather", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web_search"}]
    messages = fixed(body_of(Q, user(answer("toolu_9")), tools=tools))["messages"]
    assert messages[1] == assistant({"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {}})


def test_messages_toolmend_cannot_read_are_forwarded_as_sent() -> None:
    for body in (body_of(Q, {"role": "assistant", "content": None}, thinking=MANUAL), body_of(Q, "not a message", {"role": "assistant"}),
                 {"model": "m", "messages": "hello"}, body_of(Q, assistant(7, SAY))):
        assert untouched(body)


@pytest.mark.parametrize(("ids", "valid"), [
    ([], True),
    (["toolu_01A"], True),
    (["toolu_01A", "call-2", "X_9"], True),
    (["toolu_01A", "functions.Bash:0"], False),
    (["toolu_01A", ""], False),  # an empty id matches nothing
    (["toolu_01A", "a\nb"], False),
    (["toolu_01A\n"], False),
    (["\n"], False),
    (["___", "-"], True),  # nothing is left once the allowed characters go
    (["toolu_é"], False),
    (["toolu_\u0661\u0662"], False),  # Arabic-Indic digits: alphanumeric, but no id characters
    (["toolu_1\x00"], False),
])
def test_the_ids_are_matched_all_at_once_as_one_at_a_time(ids: list[str], valid: bool) -> None:
    from proxy.dialects.ids import ID_CHARACTERS, all_id_characters
    from proxy.dialects.messages.blocks import TOOL_USE_ID_PATTERN
    assert all(TOOL_USE_ID_PATTERN.fullmatch(cid) for cid in ids) is valid
    assert all(ID_CHARACTERS.fullmatch(cid) for cid in ids) is valid
    assert all_id_characters(ids) is valid


def test_every_character_is_judged_as_the_pattern_judges_it() -> None:
    from proxy.dialects.ids import ID_CHARACTERS, all_id_characters
    for code in [*range(0x300), 0xFEFF, 0x1F600]:
        cid = f"toolu_{chr(code)}"
        assert all_id_characters([cid]) is (ID_CHARACTERS.fullmatch(cid) is not None), repr(cid)


@pytest.mark.parametrize("bad", ["functions.weather:0", "call|fc_1", "toolu_1\n"])
def test_a_refused_id_in_a_well_paired_history_needs_repair(bad: str) -> None:
    body = {"model": "m", "max_tokens": 64, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_ok", "name": "w", "input": {}},
                                          {"type": "tool_use", "id": bad, "name": "w", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_ok", "content": "a"},
                                     {"type": "tool_result", "tool_use_id": bad, "content": "b"}]}]}
    result = MESSAGES.plan(body, MESSAGES.profile("anthropic")).repair({}, Policy())
    assert [finding.code for finding in result.findings] == ["TM501", "TM501"]
    assert violations(result.body) == []


# --- a window that opens with results of unknown calls ----------------------------------------------------------


@pytest.mark.parametrize("remembered", [True, False], ids=["recalled", "synthesized"])
def test_a_turn_put_back_at_the_start_does_not_open_the_history(remembered: bool) -> None:
    """A trimmed window opening with a user message of nothing but results: the assistant turn put back in front
    of it must not become the first message, which a server wanting the user's first refuses."""
    opening = user(answer("toolu_01A"), answer("toolu_01B"))
    body = body_of(opening, user(text("And tomorrow?")))
    turn = {"dialect": "messages", "ids": ["toolu_01A", "toolu_01B"], "message_id": "msg_01", "blocks": [USE_A, USE_B]}
    result = repaired(body, recalled_by_ids(turn) if remembered else {})
    assert result is not None
    sent = result.body["messages"]
    assert sent[0] == user(text("(earlier conversation omitted)")) and sent[1]["role"] == "assistant" and sent[2] is opening
    assert [f.code for f in result.findings][-1] == "TM515"
    assert violations(result.body, user_first=True) == []
    assert violations({**result.body, "messages": sent[1:]}, user_first=True)[0].message == 'messages: first message must use the "user" role'
    # A history the client opened with the assistant is its own (Anthropic takes it): no user message is put in front.
    own = repaired(body_of(assistant(USE_A, USE_B), opening), {})
    assert own is None or "TM515" not in {f.code for f in own.findings}


# --- thinking the client altered (AM-13) -----------------------------------------------------------------------


def test_altered_thinking_in_the_latest_message_is_put_back_byte_for_byte() -> None:
    """The client normalised the whitespace of the latest assistant message's thinking; memory holds the block with
    that signature as the upstream sent it. Earlier messages, and thinking memory does not hold, stay as sent."""
    original = {"type": "thinking", "thinking": "Two lookups:\n\n  weather, then time.  \n", "signature": "EqQBCkgIARABGAIiQLsig3"}
    altered = {**original, "thinking": "Two lookups: weather, then time."}
    turn = {**TURN, "blocks": [original, REDACTED, SAY, USE_A, USE_B]}
    earlier = assistant(ALONE, {**USE_B, "id": "toolu_02"})
    body = body_of(Q, earlier, user(answer("toolu_02")), assistant(altered, REDACTED, SAY, USE_A, USE_B), RESULTS, thinking=MANUAL)
    state = served(turn["blocks"])
    assert violations(body, state=state)[0].rule == "AM-13"
    result = repaired(body, recalled_by_ids(turn, OTHER))
    assert result is not None and [(f.code, f.index, f.action) for f in result.findings] == [("TM516", 3, "restored")]
    sent = result.body["messages"]
    assert sent[3]["content"] == [original, REDACTED, SAY, USE_A, USE_B] and sent[3]["content"][0] is not original  # a copy
    assert orjson.dumps(sent[3]["content"][0]) == orjson.dumps(original)
    assert sent[1] is earlier and all(sent[n] is body["messages"][n] for n in (0, 2, 4))
    assert violations(result.body, state=state) == []
    # Memory holding other thinking (another signature), or nothing: the request goes as the client sent it.
    for memory in ({**turn, "blocks": [THINK, USE_A, USE_B]}, None):
        planned = MESSAGES.plan(body, ANTHROPIC)
        assert planned is not None and planned.repair(recalled_by_ids(memory) if memory else {}, DEFAULT).findings == ()
def test_with_thinking_off_a_turn_from_memory_loses_its_thinking_and_the_client_s_earlier_thinking_stays() -> None:
    earlier = assistant(ALONE, text("Hello."))
    body = body_of(Q, earlier, user(text("Weather and time?")), RESULTS)
    result = repaired(body, recalled_by_ids(TURN))
    assert result is not None
    assert result.body["messages"] == [Q, earlier, user(text("Weather and time?")), assistant(SAY, USE_A, USE_B), RESULTS]
    assert result.body["messages"][1] is earlier  # not the final message: the client's own thinking is not ours to remove
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM101", 3, "inserted"), ("TM511", 3, "removed")]
    assert violations(result.body, state=served()) == []


def test_every_thinking_block_at_the_end_of_a_message_goes_not_only_the_last() -> None:
    body = body_of(Q, assistant(SAY, ALONE, THINK), user(text("Hello?")))
    result = repaired(body)
    assert result is not None and result.body["messages"] == [Q, assistant(SAY), user(text("Hello?"))]
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM507", 1, "removed")]
    assert violations(body, state=served()) and violations(result.body, state=served()) == []


def test_thinking_is_not_restored_from_a_remembered_turn_that_made_only_some_of_the_final_turn_s_calls() -> None:
    only_a = {"dialect": "messages", "ids": ["toolu_01A"], "message_id": "msg_03", "blocks": [ALONE, USE_A]}
    body = body_of(Q, assistant(USE_A, USE_B), RESULTS, thinking=MANUAL)
    result = repaired(body, recalled_by_ids(only_a))
    assert result is not None and result.body["messages"] == body["messages"] and "thinking" not in result.body
    assert [(f.code, f.action) for f in result.findings] == [("TM510", "thinking-disabled")]  # ALONE was made for A alone


def test_every_thinking_block_after_text_moves_to_the_front_together() -> None:
    body = body_of(Q, assistant(SAY, THINK, REDACTED, USE_A, USE_B), RESULTS, thinking=MANUAL)
    result = repaired(body)
    assert result is not None and result.body["messages"][1] == assistant(THINK, REDACTED, SAY, USE_A, USE_B)


def test_a_tool_result_whose_only_content_is_empty_text_loses_its_content_not_keeps_an_empty_list() -> None:
    body = body_of(Q, assistant(USE_A), user(answer("toolu_01A", [text("")])))
    result = repaired(body)
    assert result is not None and result.body["messages"][2] == user({"type": "tool_result", "tool_use_id": "toolu_01A"})
    assert violations(result.body, state=served()) == []


def test_only_the_thinking_of_the_remembered_turn_is_restored_not_its_text() -> None:
    body = body_of(Q, assistant(SAY, USE_A, USE_B), RESULTS, thinking=MANUAL)
    result = repaired(body, recalled_by_ids(TURN))
    assert result is not None and result.body["messages"][1] == assistant(THINK, REDACTED, SAY, USE_A, USE_B)
    assert [(f.code, f.action) for f in result.findings] == [("TM510", "restored")]
    assert violations(result.body, state=served()) == []
