"""Fuzzing the Gemini repair engine with hypothesis, as tests/test_fuzz_dialects.py fuzzes the other dialects.

Generated ``contents`` lists (valid parts, broken orders, duplicate ids, calls and responses with and without ids and
names, signatures, any JSON type in any field, unknown roles), with or without the remembered turns of their own
model contents, for every target and every orphan and thinking policy: planning and repairing never raise, never
touch the body they are given, and a repair that was not refused encodes and needs no second repair.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from proxy.dialects.gemini.keys import turn_ids
from proxy.dialects.gemini.plan import plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.target import GeminiTarget
from proxy.repair import ORPHAN_POLICIES, Policy, Result
from proxy.turns import Turn
from tests.support.hypothesis_budget import examples
from tests.test_fuzz_dialects import either, json_values, texts, with_duplicates

ENGINE = settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
#: A target that checks signatures and takes ids, and one that does neither.
TARGETS = (GeminiTarget("developer", "gemini-3-pro-preview"), GeminiTarget("vertex", "gemini-2.5-pro"))
POLICIES = (*(Policy(orphans=orphans) for orphans in ORPHAN_POLICIES), Policy(thinking="reject"), Policy(dummy_signatures=True))

IDS = either(st.sampled_from(["c1", "c2", "c3", ""]))
NAMES = either(st.sampled_from(["f", "g", ""]))
call = st.fixed_dictionaries({"name": NAMES}, optional={"args": either(st.dictionaries(st.sampled_from("ab"), json_values, max_size=2)),
                                                        "id": IDS})
response = st.fixed_dictionaries({"name": NAMES}, optional={"response": json_values, "id": IDS})
SIGNATURES = either(st.sampled_from(["c2lnMQ==", "c2lnMg==", "skip_thought_signature_validator", ""]))
part = st.one_of(
    st.fixed_dictionaries({"functionCall": either(call)}, optional={"thoughtSignature": SIGNATURES}),
    st.fixed_dictionaries({"functionResponse": either(response)}),
    st.fixed_dictionaries({"text": either(texts)}, optional={"thought": either(st.booleans()), "thoughtSignature": SIGNATURES}),
    st.fixed_dictionaries({"inlineData": json_values}),
    st.just({}),
    json_values,
)
content = st.fixed_dictionaries({}, optional={"role": either(st.sampled_from(["user", "model", "function", "tool", "assistant", "system"])),
                                              "parts": either(with_duplicates(part))})
bodies = st.fixed_dictionaries({"contents": either(with_duplicates(st.one_of(content, content, content, json_values)))},
                               optional={"tools": either(st.lists(st.fixed_dictionaries({"functionDeclarations": st.lists(
                                   st.fixed_dictionaries({"name": NAMES}), max_size=2)}), max_size=1))})


def remembered(body: dict[str, Any]) -> dict[str, Turn]:
    """What memory would hold had the upstream answered with the body's own model contents."""
    contents = body.get("contents")
    memory: dict[str, Turn] = {}
    for entry in contents if type(contents) is list else ():
        parts = entry.get("parts") if type(entry) is dict else None
        if type(parts) is list and (ids := turn_ids(parts)):
            turn: Turn = {"dialect": "gemini", "parts": copy.deepcopy([p for p in parts if type(p) is dict]), "ids": ids}
            memory.update(dict.fromkeys(ids, turn))
    return memory


def repaired(body: dict[str, Any], target: GeminiTarget, policy: Policy, memory: dict[str, Turn]) -> Result | None:
    planned = plan(body, gemini_profile(target.family), target)
    if planned is None:
        return None
    return planned.repair({key: memory[key] for key in planned.recall if key in memory}, policy)


@ENGINE
@given(body=bodies, memory=st.booleans())
# Found by this property: responses the orphan policy dropped from between two model contents left them side by side.
@example(body={"contents": [{"role": "model", "parts": [{"text": "a"}, {"functionResponse": {"name": "f"}}]},
                            {"role": "model", "parts": [{"text": "b"}, {"functionResponse": {"name": "f"}}]}]}, memory=False)
def test_gemini_engine_never_raises_and_repairs_once(body: dict[str, Any], memory: bool) -> None:
    turns = remembered(body) if memory else {}
    sent = copy.deepcopy(body)
    for target in TARGETS:
        for policy in POLICIES:
            result = repaired(body, target, policy, turns)
            assert body == sent, "the repair changed the request it was given"
            if result is None or not result.changed:
                continue
            encoded = orjson.dumps(result.body)
            again = repaired(result.body, target, policy, turns)
            assert again is None or (again.rejected is None and not again.changed), (target, policy, again)
            assert orjson.dumps(result.body) == encoded, "the second repair changed the first one's body"
