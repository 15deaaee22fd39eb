"""Property tests of the Gemini repair: valid Gemini histories, broken the ways agent loops break them, repaired.

* ``valid_histories()`` generates requests the strict Gemini validator accepts for a target (Developer API or Vertex AI,
  Gemini 2.5 or 3), with what the server minted (``ServerState``) and what toolmend remembered of its answers
  (``keys.turn_ids``): user turns, tool loops of 1-3 parallel calls (with ids where the endpoint takes them, a thought
  part, the first call signed on Gemini 3) answered in one content in any order, sequential steps, text answers.
* ``BREAKERS`` break them 1-3 at a time: a dropped call content (GN-2), responses split one per content (GN-1), a lost
  response, text between the calls and their responses, parallel calls split over model contents (GN-3), the legacy
  ``function`` role (GN-5), response and call names lost (GN-7), empty text parts (GN-10), ids sent where the endpoint refuses
  them (GN-9), a window trimmed to open with responses (GN-3), and thought signatures stripped (GN-11).
* The properties: the repair is accepted by the strict validator (signatures checked), loses no response's output,
  never edits the request it was given, needs no second repair; a valid history is not planned at all.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.dialects.gemini.keys import turn_ids
from proxy.dialects.gemini.plan import plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.target import GeminiTarget
from proxy.dialects.gemini.view import read
from proxy.repair import Policy
from proxy.repair.history import Pairing
from tests.support.gemini_validator import ServerState, check
from tests.support.hypothesis_budget import examples
from tests.support.pairing_check import checked_pairings, fields

TARGETS = (GeminiTarget("developer", "gemini-3-pro-preview"), GeminiTarget("developer", "gemini-2.5-flash"),
           GeminiTarget("vertex", "gemini-2.5-pro"), GeminiTarget("vertex", "gemini-3.5-flash"))
NAMES = ("read_file", "shell", "search")


class History:
    """One generated request: its contents, its target, the server's signatures, and what toolmend remembered."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw
        self.count = 0
        self.target: GeminiTarget = draw(st.sampled_from(TARGETS))
        self.ids = self.target.takes_ids and draw(st.booleans())
        self.state = ServerState()
        self.memory: dict[str, dict[str, Any]] = {}
        self.contents: list[dict[str, Any]] = []

    def tag(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def user_text(self) -> None:
        self.contents.append({"role": "user", "parts": [{"text": self.tag()}]})

    def step(self) -> None:
        """The model calls 1-3 tools at once; the agent answers them all, in any order, in one content."""
        parts: list[dict[str, Any]] = []
        if self.draw(st.booleans()):
            parts.append({"text": self.tag(), "thought": True})
        calls = []
        for _ in range(self.draw(st.integers(1, 3))):
            call: dict[str, Any] = {"name": self.draw(st.sampled_from(NAMES)), "args": {"arg": self.tag()}}
            if self.ids:
                call["id"] = f"call_{self.count}"
            calls.append(call)
            parts.append({"functionCall": call})
        if self.target.signs_calls:
            first = next(part for part in parts if "functionCall" in part)
            first["thoughtSignature"] = f"c2ln{self.count:04}"
        self.state.mint(parts)
        turn = {"dialect": "gemini", "parts": copy.deepcopy(parts), "ids": turn_ids(parts)}
        self.memory.update(dict.fromkeys(turn["ids"], turn))
        self.contents.append({"role": "model", "parts": parts})
        responses = [{"functionResponse": {**({"id": call["id"]} if "id" in call else {}), "name": call["name"],
                                           "response": {"output": self.tag()}}} for call in calls]
        self.contents.append({"role": "user", "parts": self.draw(st.permutations(responses))})


@st.composite
def valid_histories(draw: Callable[[Any], Any]) -> History:
    history = History(draw)
    history.user_text()
    for _ in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 2))):
            history.step()
        if draw(st.booleans()):
            history.contents.append({"role": "model", "parts": [{"text": history.tag()}]})
            history.user_text()
    return history


Breaker = Callable[[History, Callable[[Any], Any]], None]


def _calls(content: dict[str, Any]) -> bool:
    return content.get("role") == "model" and any("functionCall" in part for part in content["parts"])


def _responses(content: dict[str, Any]) -> bool:
    return any("functionResponse" in part for part in content["parts"])


def _where(history: History, draw: Callable[[Any], Any], test: Callable[[dict[str, Any]], bool]) -> int | None:
    found = [n for n, content in enumerate(history.contents) if test(content)]
    return draw(st.sampled_from(found)) if found else None


def drop_call_content(history: History, draw: Callable[[Any], Any]) -> None:
    if (n := _where(history, draw, _calls)) is not None:
        del history.contents[n]


def split_responses(history: History, draw: Callable[[Any], Any]) -> None:
    if (n := _where(history, draw, _responses)) is not None:
        parts = history.contents[n]["parts"]
        history.contents[n:n + 1] = [{**history.contents[n], "parts": [part]} for part in parts]


def lose_response(history: History, draw: Callable[[Any], Any]) -> None:
    n = _where(history, draw, lambda content: _responses(content) and len(content["parts"]) > 1)
    if n is not None:
        parts = list(history.contents[n]["parts"])
        del parts[draw(st.integers(0, len(parts) - 1))]
        history.contents[n] = {**history.contents[n], "parts": parts}


def interleave_text(history: History, draw: Callable[[Any], Any]) -> None:
    if (n := _where(history, draw, _calls)) is not None:
        history.contents.insert(n + 1, {"role": "user", "parts": [{"text": "reminder " + history.tag()}]})


def split_parallel_calls(history: History, draw: Callable[[Any], Any]) -> None:
    n = _where(history, draw, lambda content: _calls(content) and len(content["parts"]) > 1)
    if n is not None:
        parts = history.contents[n]["parts"]
        at = draw(st.integers(1, len(parts) - 1))
        history.contents[n:n + 1] = [{"role": "model", "parts": parts[:at]}, {"role": "model", "parts": parts[at:]}]


def legacy_role(history: History, draw: Callable[[Any], Any]) -> None:
    if (n := _where(history, draw, _responses)) is not None:
        history.contents[n] = {**history.contents[n], "role": "function"}


def lose_names(history: History, draw: Callable[[Any], Any]) -> None:
    if (n := _where(history, draw, _responses)) is not None:
        history.contents[n] = {**history.contents[n], "parts": [
            {"functionResponse": {**part["functionResponse"], "name": draw(st.sampled_from(["", "unknown"]))}} for part in history.contents[n]["parts"]]}


def lose_call_names(history: History, draw: Callable[[Any], Any]) -> None:
    """A stream split a call's name from its arguments and the client kept the call nameless (where calls have ids)."""
    if history.ids and (n := _where(history, draw, _calls)) is not None:
        history.contents[n] = {**history.contents[n], "parts": [
            {**part, "functionCall": {**part["functionCall"], "name": ""}} if "functionCall" in part else part for part in history.contents[n]["parts"]]}


def empty_text(history: History, draw: Callable[[Any], Any]) -> None:
    if (n := _where(history, draw, _calls)) is not None:
        history.contents[n] = {**history.contents[n], "parts": [{"text": ""}, *history.contents[n]["parts"]]}


def bridge_ids(history: History, draw: Callable[[Any], Any]) -> None:
    """An OpenAI bridge forwards its own call ids, matching, where the history had none: a response gets the id of
    the call of its name in the content right before it."""
    if history.ids:
        return
    previous: dict[str, list[str]] = {}  # the ids of the calls of the content before, by name
    for index, content in enumerate(history.contents):
        if _calls(content):
            content["parts"] = [{**part, "functionCall": {**part["functionCall"], "id": f"b{index}.{k}"}} if "functionCall" in part else part
                                for k, part in enumerate(content["parts"])]
            named: dict[str, list[str]] = {}
            for part in content["parts"]:
                if "functionCall" in part:
                    named.setdefault(part["functionCall"]["name"], []).append(part["functionCall"]["id"])
            previous = named
            continue
        if _responses(content):
            content["parts"] = [{"functionResponse": {**part["functionResponse"], "id": ids.pop(0)}}
                                if "functionResponse" in part and (ids := previous.get(part["functionResponse"]["name"])) else part
                                for part in content["parts"]]
        previous = {}


def trim_window(history: History, draw: Callable[[Any], Any]) -> None:
    """A context window trimmed so that it opens with a response content (its call content and all before it gone)."""
    if (n := _where(history, draw, _responses)) is not None:
        del history.contents[:n]


def strip_signatures(history: History, draw: Callable[[Any], Any]) -> None:
    history.contents = [{**content, "parts": [{key: value for key, value in part.items() if key != "thoughtSignature"} for part in content["parts"]]}
                        for content in history.contents]


BREAKERS: tuple[Breaker, ...] = (drop_call_content, split_responses, lose_response, interleave_text, split_parallel_calls, legacy_role,
                                 lose_names, lose_call_names, empty_text, bridge_ids, trim_window, strip_signatures)


def config(default: int) -> settings:
    return settings(max_examples=examples(default), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def repaired(history: History, body: dict[str, Any]) -> Any:
    planned = plan(body, gemini_profile(history.target.family), history.target)
    if planned is None:
        return body
    result = planned.repair({key: turn for key, turn in history.memory.items() if key in planned.recall}, Policy())
    assert result.rejected is None, result.rejected
    return result.body


@config(150)
@given(valid_histories())
def test_valid_histories_are_not_planned(history: History) -> None:
    body = {"contents": history.contents}
    assert check(body, history.target, history.state) is None
    assert plan(body, gemini_profile(history.target.family), history.target) is None


@config(300)
@given(valid_histories(), st.lists(st.sampled_from(BREAKERS), min_size=1, max_size=3), st.data())
def test_broken_histories_are_repaired_into_ones_a_strict_server_accepts(history: History, breakers: list[Breaker], data: st.DataObject) -> None:
    for breaker in breakers:
        breaker(history, data.draw)
    body = {"contents": history.contents}
    sent = copy.deepcopy(body)
    with checked_pairings():
        fixed = repaired(history, body)
    assert body == sent  # the request as given is never edited
    assert check(fixed, history.target, history.state) is None, (fixed, check(fixed, history.target, history.state))
    assert plan(fixed, gemini_profile(history.target.family), history.target) is None
    # No response is lost: each one's output is in the repaired history (as a response, or as the text TM610 made).
    sent_text = orjson.dumps(fixed).decode()
    outputs = [part["functionResponse"]["response"]["output"] for content in sent["contents"] for part in content["parts"] if "functionResponse" in part]
    assert all(f'"{output}"' in sent_text or f'\\"{output}\\"' in sent_text for output in outputs)


@config(150)
@given(valid_histories(), st.lists(st.sampled_from(BREAKERS), min_size=1, max_size=3), st.data(),
       st.sampled_from([Policy(), Policy(orphans="drop"), Policy(dummy_signatures=True, continue_model_turn=True)]))
def test_the_rules_over_the_marked_contents_repair_as_over_every_content(history: History, breakers: list[Breaker],
                                                                         data: st.DataObject, policy: Policy) -> None:
    """The rules that edit one content at a time visit only what the check marked (and what was made): what they would
    change elsewhere, they must not miss."""
    for breaker in breakers:
        breaker(history, data.draw)
    planned = plan({"contents": history.contents}, gemini_profile(history.target.family), history.target)
    if planned is None:
        return
    recalled = {key: turn for key, turn in history.memory.items() if key in planned.recall}
    marked, walked = planned.repair(recalled, policy), dataclasses.replace(planned, marked=None).repair(recalled, policy)
    assert orjson.dumps(marked.body) == orjson.dumps(walked.body)
    assert marked.findings == walked.findings and marked.rejected == walked.rejected


@config(150)
@given(valid_histories(), st.lists(st.sampled_from(BREAKERS), max_size=3), st.data())
def test_the_view_pairs_its_entries_as_a_walk_of_them_does(history: History, breakers: list[Breaker], data: st.DataObject) -> None:
    """The view hands the structural rules where its calls and results stand as it reads them (``View.pairing``): what a
    walk of its entries finds (``Pairing``), on contents as sent (before the Gemini rules shape them)."""
    for breaker in breakers:
        breaker(history, data.draw)
    view = read(history.contents, {})
    assert fields(view.pairing) == fields(Pairing(view.entries))


def test_the_view_pairs_odd_contents_as_a_walk_of_them_does() -> None:
    call = {"functionCall": {"name": "f"}}
    contents = [
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},  # before any call
        {"role": "model", "parts": [call, {"functionCall": {"id": "a", "name": "g"}}]},
        {"role": "model", "parts": [{"functionCall": {"id": "a", "name": "g"}}]},  # the same id again, right after
        {"role": "user", "parts": [{"functionResponse": {"id": "a", "name": "g", "response": {}}}, {"text": "and"},
                                   {"functionResponse": {"name": "f", "response": {}}}]},
        "not a content", {"role": "function", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
        {"role": "model", "parts": [{"text": "done"}]}, {"parts": []}, {"role": "model", "parts": [call]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]},
    ]
    view = read(contents, {})
    assert view.pairing.repeated and fields(view.pairing) == fields(Pairing(view.entries))
