"""The runs of contents the view leaves out (``inert_runs``): what a repair leaves out, and that it comes to the very
body and findings of a repair that reads every content (``marked=None``, which leaves nothing out).

Each case is built so that something is left out (asserted); the cases are those where leaving out too much would
change the repair: a remembered turn or another response naming a left-out call, a response without an id after a
left-out call content, a run that would end before a response content, contents the rules over contents copied.
"""

import dataclasses
import importlib
from typing import Any

import orjson
import pytest

from proxy.dialects.chat.plan import DEFAULT_POLICY
from proxy.dialects.gemini.keys import turn_ids
from proxy.dialects.gemini.plan import GeminiPlan, plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.target import GeminiTarget
from proxy.repair import Policy
from proxy.turns import Turn

G25 = GeminiTarget("developer", "gemini-2.5-flash")
Q = {"role": "user", "parts": [{"text": "Look these up."}]}
DONE = {"role": "model", "parts": [{"text": "Done."}]}


def call(key: str | None, name: str = "search") -> dict[str, Any]:
    return {"functionCall": {**({"id": key} if key else {}), "name": name, "args": {"q": key or name}}}


def answer(key: str | None, name: str = "search") -> dict[str, Any]:
    return {"functionResponse": {**({"id": key} if key else {}), "name": name, "response": {"output": f"for {key or name}"}}}


def step(*keys: str | None) -> list[dict[str, Any]]:
    """A call content with a call per key, and the content answering them exactly."""
    return [{"role": "model", "parts": [call(key) for key in keys]}, {"role": "user", "parts": [answer(key) for key in keys]}]


def orphan(key: str) -> dict[str, Any]:
    """A response content whose call content the client dropped: a repair runs, and a run ends before it."""
    return {"role": "user", "parts": [answer(key)]}


def remembered(*keys: str) -> Turn:
    parts = [call(key) for key in keys]
    return {"dialect": "gemini", "parts": parts, "ids": turn_ids(parts)}


def planned(contents: list[Any]) -> GeminiPlan:
    found = plan({"contents": contents}, gemini_profile("gemini"), G25)
    assert found is not None
    return found


@pytest.fixture
def left_out(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The contents the repairs of a test leave out of their view, as the rules over contents left them."""
    module = importlib.import_module("proxy.dialects.gemini.plan")
    inert_runs, seen = module.inert_runs, []

    def recorded(contents: list[Any], sealed: Any) -> Any:
        runs = inert_runs(contents, sealed)
        seen.extend(contents[at] for run, _ in runs for at in run)
        return runs

    monkeypatch.setattr(module, "inert_runs", recorded)
    return seen


def same_repair(found: GeminiPlan, memory: tuple[Turn, ...] = (), policy: Policy = DEFAULT_POLICY) -> None:
    """The repair that leaves runs out comes to what the repair that reads every content does."""
    recalled = {key: turn for turn in memory for key in turn["ids"] if key in found.recall}
    leaving, reading = found.repair(recalled, policy), dataclasses.replace(found, marked=None).repair(recalled, policy)
    assert orjson.dumps(leaving.body) == orjson.dumps(reading.body)
    assert leaving.findings == reading.findings and leaving.rejected == reading.rejected


def holding(contents: list[Any], part: Any) -> bool:
    """Whether one of ``contents`` holds ``part`` (the very object)."""
    return any(held is part for content in contents for held in content["parts"])


def test_exactly_answered_steps_and_plain_contents_are_left_out_up_to_a_model_content(left_out: list[Any]) -> None:
    contents = [Q, *step("a1", "a2"), DONE, Q, *step("b1"), DONE, Q, orphan("lost"), DONE]
    found = planned(contents)
    for policy in (DEFAULT_POLICY, Policy(orphans="drop")):
        left_out.clear()
        same_repair(found, (remembered("lost"),), policy)
        # Up to the model content before the orphan's user content, and what follows the last model content.
        assert left_out == contents[:7] + contents[10:]


def test_a_call_another_response_names_is_not_left_out(left_out: list[Any]) -> None:
    # The split response to c1 arrives after the exact step: the step answers c1 exactly, yet c1 is named elsewhere.
    contents = [Q, *step("c1"), DONE, Q, *step("d1", "d2"), {"role": "user", "parts": [answer("c1")]}, DONE]
    same_repair(planned(contents))
    assert contents[0] in left_out and contents[1] not in left_out


def test_a_call_a_remembered_turn_names_is_not_left_out(left_out: list[Any]) -> None:
    # The client dropped the call content of "x"; memory holds it as sent, with "y", which the client still has.
    contents = [Q, *step("y"), DONE, Q, orphan("x"), DONE]
    found = planned(contents)
    same_repair(found)
    assert contents[1] in left_out  # with nothing recalled
    left_out.clear()
    same_repair(found, (remembered("x", "y"),))
    assert contents[0] in left_out and contents[1] not in left_out  # not once the turn that names it is recalled


def test_a_response_without_an_id_after_a_left_out_call_content_answers_no_earlier_call(left_out: list[Any]) -> None:
    contents = [Q, {"role": "model", "parts": [call(None, "read"), call(None, "grep")]},
                {"role": "user", "parts": [answer(None, "read")]}, *step(None), DONE,
                {"role": "user", "parts": [answer(None, "grep")]}, DONE]
    same_repair(planned(contents))
    assert left_out == [contents[0], contents[3], contents[4], contents[7]]


@pytest.mark.parametrize("after", [[orphan("z")], []], ids=["a response content", "the end"])
def test_a_run_ends_before_a_model_content_or_at_the_end(after: list[Any], left_out: list[Any]) -> None:
    contents = [Q, {"role": "model", "parts": [call("w")]}, Q, *step("v"), Q, *after]
    same_repair(planned(contents))
    assert left_out == ([contents[0], contents[2]] if after else [contents[0], *contents[2:6]])


def test_responses_spread_over_contents_in_the_calls_order_are_left_out_with_their_call_content(left_out: list[Any]) -> None:
    calls = step("s1", "s2")[0]
    contents = [Q, calls, {"role": "user", "parts": [answer("s1")]}, {"role": "user", "parts": [answer("s2")]}, DONE,
                Q, orphan("lost"), DONE]
    found = planned(contents)
    same_repair(found)
    assert left_out == [*contents[:4], contents[7]]
    # TM601 merges them after the view, whether the view read them or not.
    assert found.repair({}, DEFAULT_POLICY).body["contents"][2]["parts"] == [answer("s1"), answer("s2")]


def test_responses_that_stop_before_the_last_call_leave_their_call_content_in(left_out: list[Any]) -> None:
    contents = [Q, step("t1", "t2")[0], {"role": "user", "parts": [answer("t1")]}, DONE, Q, *step("u1"), DONE]
    same_repair(planned(contents))
    assert contents[1] not in left_out and contents[5] in left_out


@pytest.mark.parametrize("shape", ["a thought content of its own before the calls", "responses under the role function",
                                   "an empty text part among the calls"])
def test_a_call_content_the_rules_over_contents_copy_with_its_very_calls_is_left_out(shape: str, left_out: list[Any]) -> None:
    calls, answers = step("k1", "k2")
    if shape == "a thought content of its own before the calls":  # TM603 merges the two model contents
        edited = [{"role": "model", "parts": [{"text": "Thinking.", "thought": True}]}, calls, answers]
    elif shape == "responses under the role function":  # TM605 gives the content the role user
        edited = [calls, {"role": "function", "parts": answers["parts"]}]
    else:  # TM607 drops the empty part
        edited = [{"role": "model", "parts": [calls["parts"][0], {"text": ""}, calls["parts"][1]]}, answers]
    same_repair(planned([Q, *edited, DONE, Q, orphan("lost"), DONE]))
    assert holding(left_out, calls["parts"][0]) and holding(left_out, answers["parts"][0])


@pytest.mark.parametrize("at", [0, 1], ids=["its first call", "its second call"])
def test_a_call_content_whose_call_the_rules_over_contents_replace_is_read(at: int, left_out: list[Any]) -> None:
    # TM613 names a call sent without a name from memory: a copy of the call part, which the check did not judge; TM606
    # then gives the response that name.
    calls, answers = step("n0", "n1")
    nameless = {"functionCall": {"id": f"n{at}", "args": {}}}
    response = {"functionResponse": {"id": f"n{at}", "response": {"output": "sent"}}}
    calls["parts"][at], answers["parts"][at] = nameless, response
    contents = [Q, calls, answers, DONE]
    same_repair(planned(contents), (remembered("n0", "n1"),))
    assert contents[0] in left_out and not holding(left_out, response)


def test_a_finding_on_a_turn_restored_after_a_left_out_run_names_the_response_it_was_restored_for(left_out: list[Any]) -> None:
    # Memory restores the turn of "x" with "y", which nothing answers: TM104's finding is on the restored turn, which
    # stands for the response at 3 (found by fuzzing: it named the turn's place in the view, one less with Q left out).
    contents = [Q, DONE, {"role": "user", "parts": [{"text": "Again."}]}, orphan("x")]
    found = planned(contents)
    same_repair(found, (remembered("x", "y"),))
    assert left_out == [Q]
    placeholder = next(finding for finding in found.repair({"x": remembered("x", "y")}, DEFAULT_POLICY).findings if finding.code == "TM104")
    assert placeholder.index == 3


def test_nothing_is_left_out_when_a_remembered_id_is_shaped_like_a_view_id(left_out: list[Any]) -> None:
    # The client's call without an id at contents[0].parts[0] is known in the view as "toolmend:contents[0].parts[0]";
    # read, the restored turn's call of that id meets it (found by fuzzing).
    contents = [*step(None), DONE, orphan("x")]
    found = planned(contents)
    same_repair(found, (remembered("x", "toolmend:contents[0].parts[0]"),))
    assert contents[0] not in left_out
    left_out.clear()
    same_repair(found)
    assert contents[0] in left_out  # with nothing remembered
