"""The Gemini plan over whole histories: the structural rules through the view, memory, policies, targets.

What an agent loop does to a Gemini history (drops its model contents, splits parallel responses, strips
signatures, leaves calls unanswered) is repaired into one the strict validator takes; what needs nothing is the
client's very object, and every content no rule touched is sent as the same object.
"""

from typing import Any

import pytest

from proxy.dialects.chat.plan import DEFAULT_POLICY
from proxy.dialects.gemini.keys import digest_key, turn_ids
from proxy.dialects.gemini.plan import plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.rules.unsigned_call import DUMMY
from proxy.dialects.gemini.target import GeminiTarget
from proxy.dialects.gemini.view import read
from proxy.repair import DEFAULT_PLACEHOLDER, Policy, Result
from tests.support.gemini_validator import ServerState, check

G3 = GeminiTarget("developer", "gemini-3-pro-preview")
G25 = GeminiTarget("developer", "gemini-2.5-flash")
Q = {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}
THOUGHT = {"text": "Two lookups.", "thought": True}
CALL_A = {"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnMQ=="}
CALL_B = {"functionCall": {"id": "c2", "name": "weather", "args": {"city": "Rome"}}}
ANSWER_A = {"functionResponse": {"id": "c1", "name": "weather", "response": {"temp": "18C"}}}
ANSWER_B = {"functionResponse": {"id": "c2", "name": "weather", "response": {"temp": "24C"}}}
TURN = {"dialect": "gemini", "parts": [THOUGHT, CALL_A, CALL_B], "ids": turn_ids([THOUGHT, CALL_A, CALL_B])}
SERVED = ServerState({"c2lnMQ=="})


def model(*parts: Any) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def user(*parts: Any) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def without_id(part: dict[str, Any]) -> dict[str, Any]:
    key = "functionCall" if "functionCall" in part else "functionResponse"
    return {**part, key: {name: value for name, value in part[key].items() if name != "id"}}


def repair(contents: list[Any], target: GeminiTarget = G3, memory: tuple[dict[str, Any], ...] = (),
           policy: Policy = DEFAULT_POLICY) -> Result:
    body = {"contents": contents}
    planned = plan(body, gemini_profile(target.family), target)
    assert planned is not None
    recalled = {key: turn for turn in memory for key in turn["ids"] if key in planned.recall}
    return planned.repair(recalled, policy)


def test_a_valid_history_needs_no_plan() -> None:
    body = {"contents": [Q, model(THOUGHT, CALL_A, CALL_B), user(ANSWER_A, ANSWER_B)]}
    assert check(body, G3, SERVED) is None
    assert plan(body, gemini_profile("gemini"), G3) is None


def test_a_dropped_call_content_comes_back_from_memory_with_its_thought_and_signature() -> None:
    answers = user(ANSWER_A, ANSWER_B)
    result = repair([Q, answers], memory=(TURN,))
    assert result.body["contents"] == [Q, model(THOUGHT, CALL_A, CALL_B), answers]
    assert result.body["contents"][0] is Q and result.body["contents"][2] is answers
    assert [(f.code, f.source, f.calls) for f in result.findings] == [("TM101", "recalled", 2)]
    assert check(result.body, G3, SERVED) is None


def test_an_unanswered_call_gets_a_placeholder_in_the_response_content_of_its_batch() -> None:
    result = repair([Q, model(THOUGHT, CALL_A, CALL_B), user(ANSWER_A)])
    placeholder = {"functionResponse": {"name": "weather", "response": {"error": DEFAULT_PLACEHOLDER}, "id": "c2"}}
    assert result.body["contents"][2] == user(ANSWER_A, placeholder)
    assert check(result.body, G3, SERVED) is None


def test_split_responses_are_merged_and_a_stripped_signature_restored() -> None:
    unsigned = {key: value for key, value in CALL_A.items() if key != "thoughtSignature"}
    result = repair([Q, model(THOUGHT, unsigned, CALL_B), user(ANSWER_A), user(ANSWER_B)], memory=(TURN,))
    assert result.body["contents"] == [Q, model(THOUGHT, CALL_A, CALL_B), user(ANSWER_A, ANSWER_B)]
    assert {f.code for f in result.findings} == {"TM601", "TM609"}


def test_responses_without_ids_pair_by_name_and_position() -> None:
    calls = model(without_id(CALL_A), without_id(CALL_B))
    nameless = {"functionResponse": {"name": "", "response": {"temp": "24C"}}}
    result = repair([Q, calls, user(nameless), user({"text": "hm"}), user(without_id(ANSWER_A))], G25)
    named = {"functionResponse": {"name": "weather", "response": {"temp": "24C"}}}
    assert result.body["contents"] == [Q, calls, user(named, without_id(ANSWER_A)), user({"text": "hm"})]
    assert result.body["contents"][1] is calls
    assert check(result.body, G25) is None


def test_a_call_signed_by_digest_when_the_client_dropped_ids() -> None:
    remembered = {"dialect": "gemini", "parts": [without_id(CALL_A)], "ids": turn_ids([without_id(CALL_A)])}
    assert remembered["ids"] == [digest_key("weather", {"city": "Paris"})]
    unsigned = {"functionCall": {"name": "weather", "args": {"city": "Paris"}}}
    result = repair([Q, model(unsigned), user(without_id(ANSWER_A))], memory=(remembered,))
    assert result.body["contents"][1] == model(without_id(CALL_A))


@pytest.mark.parametrize("policy", [Policy(), Policy(dummy_signatures=True), Policy(thinking="reject")],
                         ids=["text", "dummy", "reject"])
def test_calls_memory_does_not_hold_follow_the_policy(policy: Policy) -> None:
    result = repair([Q, user(ANSWER_A, ANSWER_B)], policy=policy)
    codes = [f.code for f in result.findings]
    assert codes[:2] == ["TM101", "TM101"] and codes[-1] == "TM610"
    if policy.thinking == "reject":
        assert result.rejected is not None and result.rejected.code == "TM610"
        return
    contents = result.body["contents"]
    assert check(result.body, G3, SERVED) is None
    if policy.dummy_signatures:
        assert contents[1]["parts"][0]["thoughtSignature"] == DUMMY
        assert "thoughtSignature" not in contents[1]["parts"][1]
    else:
        assert all("text" in part and part["text"].startswith("[toolmend] ") for content in contents[1:] for part in content["parts"])


def test_signatures_are_not_needed_before_gemini_3_nor_before_the_current_turn() -> None:
    unsigned = {key: value for key, value in CALL_A.items() if key != "thoughtSignature"}
    old = [Q, model(unsigned), user(ANSWER_A)]
    assert plan({"contents": old}, gemini_profile("gemini"), G25) is None
    earlier = [*old, model({"text": "18C."}), user({"text": "And Rome?"}), model(CALL_B), user(ANSWER_B)]
    body = {"contents": earlier}
    assert check(body, G3) is not None  # the current turn's call is unsigned: GN-11
    earlier[5] = model({**CALL_B, "thoughtSignature": "c2lnMQ=="})
    assert check(body, G3, SERVED) is None
    assert plan(body, gemini_profile("gemini"), G3) is None


def test_ids_are_kept_where_the_endpoint_takes_them() -> None:
    body = {"contents": [Q, model(CALL_A, CALL_B), user(ANSWER_A, ANSWER_B)]}
    assert plan(body, gemini_profile("vertex"), GeminiTarget("vertex", "gemini-3-pro-preview")) is None
    vertex = GeminiTarget("vertex", "gemini-2.5-pro")
    result = repair(body["contents"], vertex)
    assert check(result.body, vertex) is None
    assert "id" not in result.body["contents"][1]["parts"][0]["functionCall"]
    assert result.body["contents"][0] is Q


def test_a_trimmed_window_opening_with_responses_gets_its_calls_and_a_user_content_before_them() -> None:
    result = repair([user(ANSWER_A, ANSWER_B), user({"text": "And tomorrow?"})], memory=(TURN,))
    assert [f.code for f in result.findings] == ["TM101", "TM611"]
    assert result.body["contents"][:2] == [user({"text": "(earlier conversation omitted)"}), model(THOUGHT, CALL_A, CALL_B)]
    assert check(result.body, G3, SERVED) is None


def test_a_response_with_an_id_never_answers_a_call_with_another_id() -> None:
    """An orphan response whose call was dropped is not taken for the answer to an unanswered call of the same name
    before it (found by the properties: the call content before had lost a response)."""
    orphan = {"functionResponse": {"id": "c9", "name": "weather", "response": {"temp": "9C"}}}
    result = repair([Q, model(CALL_A, CALL_B), user(ANSWER_A), user(orphan)], G25)
    contents = result.body["contents"]
    assert contents[2]["parts"][1]["functionResponse"]["id"] == "c2"  # a placeholder for c2
    assert contents[3:] == [model({"functionCall": {"name": "weather", "args": {}, "id": "c9"}}), user(orphan)]
    assert check(result.body, G25) is None


def test_a_signature_that_came_on_another_part_is_left_where_the_model_put_it() -> None:
    """A stream may send the signature on a later empty text part: the content is signed, not converted to text."""
    unsigned = {key: value for key, value in CALL_A.items() if key != "thoughtSignature"}
    body = {"contents": [Q, model(unsigned, {"text": "", "thoughtSignature": "c2lnMQ=="}), user(ANSWER_A)]}
    assert plan(body, gemini_profile("gemini"), G3) is None


def test_a_signature_remembered_on_an_empty_text_part_comes_back_on_that_part() -> None:
    carrier = {"text": "", "thoughtSignature": "c2lnMQ=="}
    unsigned = {key: value for key, value in CALL_A.items() if key != "thoughtSignature"}
    turn = {"dialect": "gemini", "parts": [unsigned, carrier], "ids": turn_ids([unsigned])}
    result = repair([Q, model(unsigned), user(ANSWER_A)], memory=(turn,))
    assert result.body["contents"][1] == model(unsigned, carrier)
    assert [f.code for f in result.findings] == ["TM609"]
    assert check(result.body, G3, SERVED) is None


def test_a_repeated_call_id_is_renamed_with_its_response() -> None:
    again = {"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Rome"}}}
    planned = plan({"contents": [Q, model(CALL_A), user(ANSWER_A), Q, model(again), user(ANSWER_A)]}, gemini_profile("gemini"), G25)
    assert planned is not None
    result = planned.repair({}, DEFAULT_POLICY)
    assert [finding.code for finding in result.findings] == ["TM107", "TM107"]
    assert result.body["contents"][4]["parts"][0]["functionCall"]["id"] == result.body["contents"][5]["parts"][0]["functionResponse"]["id"] == "c1_2"


def test_the_view_tells_tm107_where_an_id_is_declared_twice() -> None:
    """An id the client sent shaped like the view's own id for a call without one meets that id in the view: its pairing
    says so, and TM107 (which renames nothing while the pairing has no repeated id) renames the second."""
    assert not read([Q, model(CALL_A)], {}).pairing.repeated
    named_like_view = {"functionCall": {"id": "toolmend:contents[1].parts[0]", "name": "weather", "args": {}}}
    idless_first = [Q, model(without_id(CALL_A)), user(without_id(ANSWER_A)), Q, model(named_like_view)]
    assert read(idless_first, {}).pairing.repeated
    planned = plan({"contents": idless_first}, gemini_profile("gemini"), G25)
    assert planned is not None
    assert [finding.code for finding in planned.repair({}, DEFAULT_POLICY).findings].count("TM107") == 1


def test_every_response_the_view_may_take_for_an_orphan_is_recalled() -> None:
    # The first response answers under another name: the check still reads the second, whose call the client dropped.
    lost = {"functionResponse": {"id": "gone", "name": "weather", "response": {"temp": "9C"}}}
    renamed = {"functionResponse": {**ANSWER_A["functionResponse"], "name": "tool"}}
    planned = plan({"contents": [Q, model(CALL_A, CALL_B), user(renamed, lost)]}, gemini_profile("gemini"), G25)
    assert planned is not None and "gone" in planned.recall
