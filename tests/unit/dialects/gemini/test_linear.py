"""A Gemini repair costs work linear in the body, as tests/test_linear_repair.py shows for the other dialects.

Each history is one of the shapes a Gemini rule walks at length: twice as long, it must cost about twice the lines run
and the memory held, never four times.
"""

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from proxy.dialects.gemini.keys import turn_ids
from proxy.dialects.gemini.plan import plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.target import GeminiTarget
from proxy.repair.engine import DEFAULT_POLICY
from proxy.turns import Turn
from tests.test_linear_repair import RATIO, SIZE, lines_run, peak_allocated

G3 = GeminiTarget("developer", "gemini-3-pro-preview")
Q = {"role": "user", "parts": [{"text": "Go."}]}


def call(i: int, ids: bool = True) -> dict[str, Any]:
    made: dict[str, Any] = {"name": f"tool{i % 7}", "args": {"i": i}}
    return {**made, "id": f"c{i:06d}"} if ids else made


def response(i: int, ids: bool = True, name: str | None = None) -> dict[str, Any]:
    made = {"name": name if name is not None else f"tool{i % 7}", "response": {"ok": i}}
    return {"functionResponse": {**made, "id": f"c{i:06d}"} if ids else made}


def split_and_interleaved(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """One content of n parallel calls, each response a content of its own with a note after it (TM103, TM601)."""
    calls = [{"functionCall": call(i), **({"thoughtSignature": "c2ln"} if i == 0 else {})} for i in range(n)]
    contents = [Q, {"role": "model", "parts": calls}]
    for i in range(n):
        contents += [{"role": "user", "parts": [response(i)]}, {"role": "user", "parts": [{"text": "note"}]}]
    return {"contents": contents}, {}


def nameless_without_ids(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n calls without ids, answered by n responses named ``unknown`` (the view pairs each by position, TM606)."""
    calls = [{"functionCall": call(i, False), **({"thoughtSignature": "c2ln"} if i == 0 else {})} for i in range(n)]
    return {"contents": [Q, {"role": "model", "parts": calls},
                         {"role": "user", "parts": [response(i, False, "unknown") for i in range(n)]}]}, {}


def orphans_of_a_remembered_turn(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """The client kept the thought parts of a content of n calls and dropped the calls (TM101 puts them back; the
    remembered thoughts give way to the client's by lookup)."""
    thoughts = [{"text": f"thought {i}", "thought": True} for i in range(n)]
    parts = [*thoughts, *({"functionCall": call(i), **({"thoughtSignature": "c2ln"} if i == 0 else {})} for i in range(n))]
    turn: Turn = {"dialect": "gemini", "parts": parts, "ids": turn_ids(parts)}
    body = {"contents": [Q, {"role": "model", "parts": thoughts}, {"role": "user", "parts": [response(i) for i in range(n)]}]}
    return body, dict.fromkeys(turn["ids"], turn)


def steps_unsigned(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n sequential steps of the current turn whose signatures the client dropped, each remembered (TM609)."""
    contents: list[Any] = [Q]
    recalled: dict[str, Turn] = {}
    for i in range(n):
        signed = [{"functionCall": call(i), "thoughtSignature": "c2ln"}]
        turn: Turn = {"dialect": "gemini", "parts": signed, "ids": turn_ids(signed)}
        recalled.update(dict.fromkeys(turn["ids"], turn))
        contents += [{"role": "model", "parts": [{"functionCall": call(i)}]}, {"role": "user", "parts": [response(i)]}]
    return {"contents": contents}, recalled


def steps_unremembered(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n sequential unsigned steps memory does not hold (TM610 shows each as text)."""
    contents: list[Any] = [Q]
    for i in range(n):
        contents += [{"role": "model", "parts": [{"functionCall": call(i)}]}, {"role": "user", "parts": [response(i)]}]
    return {"contents": contents}, {}


def model_contents_in_a_row(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n model contents of one call each, then their n responses in one content (TM603)."""
    contents: list[Any] = [Q, *({"role": "model", "parts": [{"functionCall": call(i), "thoughtSignature": "c2ln"}]} for i in range(n))]
    return {"contents": [*contents, {"role": "user", "parts": [response(i) for i in range(n)]}]}, {}


CASES: dict[str, Callable[[int], tuple[dict[str, Any], dict[str, Turn]]]] = {
    "split responses, notes between (TM601, TM103)": split_and_interleaved,
    "responses without ids or names (TM606)": nameless_without_ids,
    "calls of a remembered turn, its thoughts kept (TM101)": orphans_of_a_remembered_turn,
    "steps whose signatures memory holds (TM609)": steps_unsigned,
    "steps memory does not hold (TM610)": steps_unremembered,
    "model contents in a row (TM603)": model_contents_in_a_row,
}


def repair_of(make: Callable[[int], tuple[dict[str, Any], dict[str, Turn]]], size: int) -> Callable[[], Any]:
    body, recalled = make(size)
    parsed = orjson.loads(orjson.dumps(body))

    def repair() -> Any:
        planned = plan(parsed, gemini_profile("gemini"), G3)
        assert planned is not None
        result = planned.repair(recalled, DEFAULT_POLICY)
        assert result.changed
        return orjson.dumps(result.body), result.findings

    return repair


@pytest.mark.parametrize("name", CASES)
def test_twice_the_history_costs_about_twice_the_lines(name: str) -> None:
    small, large = (lines_run(repair_of(CASES[name], size)) for size in (SIZE, 2 * SIZE))
    assert large <= RATIO * small, f"{name}: {small} lines, then {large}"


@pytest.mark.parametrize("name", CASES)
def test_twice_the_history_costs_about_twice_the_memory(name: str) -> None:
    small, large = (peak_allocated(repair_of(CASES[name], size)) for size in (SIZE, 2 * SIZE))
    assert large <= RATIO * small, f"{name}: {small} bytes at most, then {large}"
