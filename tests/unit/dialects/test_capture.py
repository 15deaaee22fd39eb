"""``proxy.dialects.capture.bounded`` with a budget of entries the reader owns: the entries kept are the parsed ones
themselves, never copies, and the bounds (entries, depth, values) hold as for copied entries."""

from typing import Any

import orjson

from proxy.dialects.capture import MAX_DEPTH, MAX_ENTRIES, MAX_VALUES, Budget, Cut, bounded
from proxy.dialects.responses.capture import is_item, turns_from_json

CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "t"}]}


def nested(objects: int, leaf: Any = "leaf") -> Any:
    """``objects`` objects, each in the one before; the last holds ``leaf``."""
    value = leaf
    for _ in range(objects):
        value = {"a": value}
    return value


def test_owned_entries_are_kept_themselves() -> None:
    entries = [REASONING, CALL]
    kept = bounded(entries, is_item, Cut(), Budget(owned=True))
    assert kept == entries and all(mine is theirs for mine, theirs in zip(kept, entries, strict=True))
    copied = bounded(entries, is_item, Cut())
    assert copied == entries and copied[0] is not REASONING and copied[0]["content"] is not REASONING["content"]


def test_owned_entries_keep_the_bounds_of_copied_ones() -> None:
    at_most = {**CALL, "id": "fc_deep", "payload": nested(MAX_DEPTH - 1)}  # the entry is level 1: MAX_DEPTH in all
    deep = {**CALL, "id": "fc_deeper", "payload": nested(MAX_DEPTH)}
    empty_too_deep = {**CALL, "id": "fc_empty", "payload": nested(MAX_DEPTH - 1, {})}  # an empty object a level too deep
    wide = {**CALL, "id": "fc_wide", "rows": [0] * MAX_VALUES}
    entries = [at_most, deep, "not an item", {}, *[CALL] * 5, wide, CALL, *[CALL] * MAX_ENTRIES]
    owned_cut, copied_cut = Cut(), Cut()
    owned = bounded(entries, is_item, owned_cut, Budget(owned=True))
    assert owned == bounded(entries, is_item, copied_cut) == [at_most, *[CALL] * 5]
    assert owned_cut.entries == copied_cut.entries == len(entries) - 6
    assert bounded([empty_too_deep], is_item, Cut(), Budget(owned=True)) == bounded([empty_too_deep], is_item, Cut()) == []


def test_an_owned_entry_left_out_too_deep_takes_the_values_a_copy_would() -> None:
    """The too-deep container's values count before the entry is left out, so a wide entry after it is cut either way."""
    half = MAX_VALUES // 2 + 1
    deep = {**CALL, "id": "fc_deeper", "payload": nested(MAX_DEPTH - 1, [0] * half)}
    wide = {**CALL, "id": "fc_wide", "rows": [0] * half}
    owned_cut, copied_cut = Cut(), Cut()
    assert bounded([deep, wide], is_item, owned_cut, Budget(owned=True)) == bounded([deep, wide], is_item, copied_cut) == []
    assert owned_cut.entries == copied_cut.entries == 2


def test_a_responses_json_answer_keeps_its_items_within_bounds() -> None:
    deep = {**CALL, "id": "fc_deeper", "call_id": "call_2", "payload": nested(MAX_DEPTH)}
    cut = Cut()
    (turn,) = turns_from_json(orjson.dumps({"id": "resp_1", "object": "response", "output": [REASONING, deep, CALL]}), cut)
    assert turn["items"] == [REASONING, CALL] and turn["ids"] == ["call_1", "resp_1"] and cut.entries == 1
