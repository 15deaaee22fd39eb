"""The runs of contents the view leaves out (``inert_runs``): what may be left out, and that a repair that leaves them
out comes to the very body and findings of one that reads every content (``marked=None``, which leaves nothing out).

Each case is built so that something is left out (asserted first); the cases are those where leaving out too much
would change the repair: a remembered turn or another response naming a left-out call, a response without an id after
a left-out call content, a run that would end before a response content.
"""

import dataclasses
from typing import Any

import orjson
import pytest

from proxy.dialects.chat.plan import DEFAULT_POLICY
from proxy.dialects.gemini.keys import turn_ids
from proxy.dialects.gemini.plan import GeminiPlan, plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.target import GeminiTarget
from proxy.dialects.gemini.view import inert_runs
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


def remembered(*keys: str) -> Turn:
    parts = [call(key) for key in keys]
    return {"dialect": "gemini", "parts": parts, "ids": turn_ids(parts)}


def planned(contents: list[Any]) -> GeminiPlan:
    found = plan({"contents": contents}, gemini_profile("gemini"), G25)
    assert found is not None
    return found


def left_out(found: GeminiPlan, memory: tuple[Turn, ...] = ()) -> list[int]:
    """The positions the view leaves out of the client's contents (none of which the contents rules change here)."""
    recalled = {key: turn for turn in memory for key in turn["ids"] if key in found.recall}
    contents = found.body["contents"]
    return [at for run, _ in inert_runs(contents, found._sealed(recalled)) for at in run]


def same_repair(found: GeminiPlan, memory: tuple[Turn, ...] = (), policy: Policy = DEFAULT_POLICY) -> None:
    recalled = {key: turn for turn in memory for key in turn["ids"] if key in found.recall}
    leaving, reading = found.repair(recalled, policy), dataclasses.replace(found, marked=None).repair(recalled, policy)
    assert orjson.dumps(leaving.body) == orjson.dumps(reading.body)
    assert leaving.findings == reading.findings and leaving.rejected == reading.rejected


def test_exactly_answered_steps_and_plain_contents_are_left_out_up_to_a_model_content() -> None:
    # An orphan response (its call content dropped) at the end: what stands before the model content before it goes.
    contents = [Q, *step("a1", "a2"), DONE, Q, *step("b1"), DONE, Q, {"role": "user", "parts": [answer("lost")]}, DONE]
    found = planned(contents)
    assert left_out(found) == [0, 1, 2, 3, 4, 5, 6, 10]  # up to the model content before the orphan's user content
    for policy in (DEFAULT_POLICY, Policy(orphans="drop")):
        same_repair(found, (remembered("lost"),), policy)
    assert found.repair({}, DEFAULT_POLICY).body["contents"][:7] == contents[:7]


def test_a_call_another_response_names_is_not_left_out() -> None:
    # The split response to c1 arrives after the exact step: the step answers c1 exactly, yet c1 is named elsewhere.
    contents = [Q, *step("c1"), DONE, Q, *step("d1", "d2"), {"role": "user", "parts": [answer("c1")]}, DONE]
    found = planned(contents)
    assert 1 not in left_out(found) and 0 in left_out(found)
    same_repair(found)


def test_a_call_a_remembered_turn_names_is_not_left_out() -> None:
    # The client dropped the call content of "x"; memory holds it as sent, with "y", which the client still has.
    contents = [Q, *step("y"), DONE, Q, {"role": "user", "parts": [answer("x")]}, DONE]
    memory = (remembered("x", "y"),)
    found = planned(contents)
    assert 1 in left_out(found)  # by the check alone
    assert 1 not in left_out(found, memory)  # not once the turn that names it is recalled
    same_repair(found, memory)


def test_a_response_without_an_id_after_a_left_out_call_content_answers_no_earlier_call() -> None:
    contents = [Q, {"role": "model", "parts": [call(None, "read"), call(None, "grep")]},
                {"role": "user", "parts": [answer(None, "read")]}, *step(None), DONE,
                {"role": "user", "parts": [answer(None, "grep")]}, DONE]
    found = planned(contents)
    assert left_out(found) == [0, 3, 4, 7]
    same_repair(found)


@pytest.mark.parametrize("after", [[{"role": "user", "parts": [answer("z")]}], []], ids=["a response content", "the end"])
def test_a_run_ends_before_a_model_content_or_at_the_end(after: list[Any]) -> None:
    contents = [Q, {"role": "model", "parts": [call("w")]}, Q, *step("v"), Q, *after]
    found = planned(contents)
    assert left_out(found) == ([0, 2] if after else [0, 2, 3, 4, 5])
    same_repair(found)
