"""TM613: a call sent back with an empty name takes the name memory holds under its id, never one made up."""

from typing import Any

from proxy.dialects.chat.plan import DEFAULT_POLICY
from proxy.dialects.gemini.keys import turn_ids
from proxy.dialects.gemini.plan import plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.target import GeminiTarget
from proxy.repair import Result
from tests.support.gemini_validator import check

G25 = GeminiTarget("developer", "gemini-2.5-flash")
Q = {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}
PARIS = {"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}}
ROME = {"functionCall": {"id": "c2", "name": "weather", "args": {"city": "Rome"}}}
TURN = {"dialect": "gemini", "parts": [PARIS, ROME], "ids": turn_ids([PARIS, ROME])}


def nameless(part: dict[str, Any]) -> dict[str, Any]:
    return {"functionCall": {**part["functionCall"], "name": ""}}


def answer(key: str, name: str, temp: str) -> dict[str, Any]:
    return {"functionResponse": {"id": key, "name": name, "response": {"temp": temp}}}


def repair(contents: list[Any], memory: tuple[dict[str, Any], ...] = (TURN,)) -> Result:
    body = {"contents": contents}
    planned = plan(body, gemini_profile("gemini"), G25)
    assert planned is not None
    return planned.repair({key: turn for turn in memory for key in turn["ids"] if key in planned.recall}, DEFAULT_POLICY)


def test_a_call_split_from_its_name_gets_it_back_from_memory_and_its_response_too() -> None:
    """A stream split the second parallel call's name from its arguments; the client sent it back nameless."""
    calls = {"role": "model", "parts": [PARIS, nameless(ROME)]}
    answers = {"role": "user", "parts": [answer("c1", "weather", "18C"), answer("c2", "", "24C")]}
    body = {"contents": [Q, calls, answers]}
    assert check(body, G25).rule == "GN-7"  # type: ignore[union-attr]
    planned = plan(body, gemini_profile("gemini"), G25)
    assert planned is not None and planned.recall == ["c2"]
    result = repair([Q, calls, answers])
    assert result.body["contents"] == [Q, {"role": "model", "parts": [PARIS, ROME]},
                                       {"role": "user", "parts": [answer("c1", "weather", "18C"), answer("c2", "weather", "24C")]}]
    assert [(f.code, f.index) for f in result.findings] == [("TM613", 1), ("TM606", 2)]
    assert result.body["contents"][0] is Q and calls["parts"][1] == nameless(ROME)  # the client's request is not edited
    assert check(result.body, G25) is None


def test_a_name_memory_does_not_hold_is_never_made_up() -> None:
    """The response's name is no evidence of the call's: the call stays nameless and the upstream says so."""
    calls = {"role": "model", "parts": [nameless(ROME)]}
    answers = {"role": "user", "parts": [answer("c2", "weather", "24C")]}
    result = repair([Q, calls, answers], memory=())
    assert "TM613" not in {f.code for f in result.findings}
    assert result.body["contents"][1]["parts"] == [nameless(ROME)]


def test_only_a_remembered_gemini_call_of_that_id_names_it() -> None:
    chat_turn = {"dialect": "chat", "ids": ["c2"], "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    other_call = {"dialect": "gemini", "parts": [PARIS], "ids": ["c2"]}  # held under c2, but its call is c1
    for turn in (chat_turn, other_call):
        result = repair([Q, {"role": "model", "parts": [nameless(ROME)]}, {"role": "user", "parts": [answer("c2", "", "24C")]}],
                        memory=(turn,))
        assert "TM613" not in {f.code for f in result.findings}


def test_a_nameless_call_without_an_id_has_nothing_to_be_recalled_by() -> None:
    call = {"functionCall": {"name": "", "args": {"city": "Rome"}}}
    body = {"contents": [Q, {"role": "model", "parts": [call]}, {"role": "user", "parts": [{"functionResponse": {"name": "", "response": {}}}]}]}
    assert plan(body, gemini_profile("gemini"), G25) is None
