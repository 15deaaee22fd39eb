"""Gemini histories in the shapes a Gemini rule walks at length, of any size, with what memory holds for them: the
linear-work tests (tests/test_linear_repair.py) repair each twice as long and count the work."""

from collections.abc import Callable
from typing import Any

from proxy.dialects.gemini.keys import turn_ids
from proxy.turns import Turn

#: The model every shape goes to: one that checks thought signatures (the body names it, as ``toolmend check`` reads it).
MODEL = "gemini-3-pro-preview"
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
    return {"model": MODEL, "contents": contents}, {}


def nameless_without_ids(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n calls without ids, answered by n responses named ``unknown`` (the view pairs each by position, TM606)."""
    calls = [{"functionCall": call(i, False), **({"thoughtSignature": "c2ln"} if i == 0 else {})} for i in range(n)]
    return {"model": MODEL, "contents": [Q, {"role": "model", "parts": calls},
                         {"role": "user", "parts": [response(i, False, "unknown") for i in range(n)]}]}, {}


def orphans_of_a_remembered_turn(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """The client kept the thought parts of a content of n calls and dropped the calls (TM101 puts them back; the
    remembered thoughts give way to the client's by lookup)."""
    thoughts = [{"text": f"thought {i}", "thought": True} for i in range(n)]
    parts = [*thoughts, *({"functionCall": call(i), **({"thoughtSignature": "c2ln"} if i == 0 else {})} for i in range(n))]
    turn: Turn = {"dialect": "gemini", "parts": parts, "ids": turn_ids(parts)}
    body = {"model": MODEL, "contents": [Q, {"role": "model", "parts": thoughts}, {"role": "user", "parts": [response(i) for i in range(n)]}]}
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
    return {"model": MODEL, "contents": contents}, recalled


def steps_unremembered(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n sequential unsigned steps memory does not hold (TM610 shows each as text)."""
    contents: list[Any] = [Q]
    for i in range(n):
        contents += [{"role": "model", "parts": [{"functionCall": call(i)}]}, {"role": "user", "parts": [response(i)]}]
    return {"model": MODEL, "contents": contents}, {}


def model_contents_in_a_row(n: int) -> tuple[dict[str, Any], dict[str, Turn]]:
    """n model contents of one call each, then their n responses in one content (TM603)."""
    contents: list[Any] = [Q, *({"role": "model", "parts": [{"functionCall": call(i), "thoughtSignature": "c2ln"}]} for i in range(n))]
    return {"model": MODEL, "contents": [*contents, {"role": "user", "parts": [response(i) for i in range(n)]}]}, {}


#: Each shape by the name its linear-work test carries.
SHAPES: dict[str, Callable[[int], tuple[dict[str, Any], dict[str, Turn]]]] = {
    "split responses, notes between (TM601, TM103)": split_and_interleaved,
    "responses without ids or names (TM606)": nameless_without_ids,
    "calls of a remembered turn, its thoughts kept (TM101)": orphans_of_a_remembered_turn,
    "steps whose signatures memory holds (TM609)": steps_unsigned,
    "steps memory does not hold (TM610)": steps_unremembered,
    "model contents in a row (TM603)": model_contents_in_a_row,
}
