"""Fuzzing the Responses and Messages dialects with hypothesis, as tests/unit/dialects/chat/test_fuzz.py fuzzes chat.

* The engine: generated Responses ``input`` lists and Messages ``messages`` lists (valid items and blocks, broken
  orders, duplicate ids, any JSON type in any field, unknown types, ``store: false``, ``previous_response_id``,
  thinking on and off), with or without the remembered turns of their own calls, under every profile of the
  dialect and every orphan policy. Planning and repairing never raise, never touch the body they are given, and a
  repair that was not refused encodes and needs no second repair.
* The HTTP layer: such bodies, arbitrary JSON and arbitrary bytes to ``/v1/responses`` and ``/v1/messages`` (and
  ``count_tokens``), the upstream (respx) answering with a generated answer the proxy captures. Never a 5XX: the
  upstream's answer relayed unchanged, or the proxy's own 4XX in the protocol's error shape, nothing forwarded.

Derandomized like every property (the ``ci`` profile of tests/conftest.py); the long random campaign is
``TOOLMEND_HYPOTHESIS=campaign TOOLMEND_HYPOTHESIS_EXAMPLES=20000 python -m pytest tests/unit/dialects/test_fuzz.py``.
"""

from __future__ import annotations

import copy
from typing import Any

import httpx
import orjson
import respx
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from proxy.dialects import MESSAGES, RESPONSES
from proxy.dialects.chat.profiles import PROFILES
from proxy.dialects.dialect import Dialect
from proxy.dialects.gemini.keys import turn_ids
from proxy.dialects.gemini.plan import plan as gemini_plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.target import GeminiTarget
from proxy.dialects.messages.capture import turns_from_json as messages_turns
from proxy.dialects.responses.capture import turns_from_json as responses_turns
from proxy.dialects.responses.items import CALL_TYPES, OUTPUT_TYPES
from proxy.repair import ORPHAN_POLICIES, Policy, Result
from proxy.turns import Turn, call_ids
from tests.support.hypothesis_budget import examples
from tests.support.proxy_fixtures import UPSTREAM, running_proxy

#: The engine properties try every profile and policy per example, in a few milliseconds; each HTTP example starts
#: a proxy (some 60 ms), so it runs fewer: the file stays near ten seconds.
ENGINE = settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
HTTP = settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
#: Every profile name a route may carry: each dialect maps it onto one of its own profiles.
PROFILE_NAMES = sorted(PROFILES)
POLICIES = tuple(Policy(orphans=orphans) for orphans in ORPHAN_POLICIES)

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
texts = st.text(max_size=8)


def either(usual: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` three times in four, else any JSON value: odd types everywhere, yet most bodies reach the rules."""
    return st.one_of(usual, usual, usual, json_values)


def fresh(*values: Any) -> st.SearchStrategy[Any]:
    """One of ``values``, a new copy each time: sampled objects are otherwise shared between items and examples."""
    return st.sampled_from(values).map(copy.deepcopy)


def with_duplicates(entries: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Lists of ``entries`` in which some entry may be repeated (a copy, as a parsed body would hold it)."""
    return st.lists(entries, max_size=8).flatmap(
        lambda drawn: st.lists(st.sampled_from(drawn).map(copy.deepcopy), max_size=2).flatmap(
            lambda again: st.permutations(drawn + again)) if drawn else st.just(drawn))


# --- Responses: input items -------------------------------------------------------------------------------

CALL_IDS = either(st.sampled_from(["c1", "c2", "c3", ""]))
ITEM_IDS = either(st.sampled_from(["fc_1", "fc_2", "ctc_1", "rs_1", "rs_2", "msg_1", "lsh_1", "bad id!", "x" * 70, ""]))
parts = st.lists(st.fixed_dictionaries({"type": either(st.sampled_from(["input_text", "output_text", "refusal", "input_image"]))},
                                       optional={"text": either(texts)}), max_size=2)
r_message = st.fixed_dictionaries(
    {"role": either(st.sampled_from(["user", "assistant", "developer", "system"]))},
    optional={"type": either(st.just("message")), "content": either(texts | parts), "id": ITEM_IDS, "status": either(st.just("completed"))},
)
r_call = st.fixed_dictionaries(
    {"type": st.sampled_from(sorted(CALL_TYPES))},
    optional={"call_id": CALL_IDS, "id": ITEM_IDS, "name": either(st.sampled_from(["f", "g"])),
              "arguments": either(st.sampled_from(["{}", '{"a": 1}', "{"])), "input": either(texts), "action": json_values,
              "status": either(st.sampled_from(["completed", "in_progress"]))},
)
r_output = st.fixed_dictionaries(
    {"type": st.sampled_from(sorted(OUTPUT_TYPES))},
    optional={"call_id": CALL_IDS, "id": ITEM_IDS, "output": either(texts | parts), "status": either(st.just("completed"))},
)
r_reasoning = st.fixed_dictionaries(
    {"type": st.just("reasoning")},
    optional={"id": ITEM_IDS, "summary": either(st.lists(st.fixed_dictionaries({"type": st.just("summary_text"), "text": either(texts)}), max_size=2)),
              "encrypted_content": either(texts), "content": json_values},
)
r_reference = st.fixed_dictionaries({"type": st.just("item_reference")}, optional={"id": ITEM_IDS})
r_unknown = st.fixed_dictionaries({"type": either(texts)}, optional={"id": ITEM_IDS, "call_id": CALL_IDS, "role": json_values})
r_item = st.one_of(r_message, r_call, r_call, r_output, r_output, r_reasoning, r_reference, r_unknown, json_values)
responses_bodies = st.fixed_dictionaries(
    {"input": either(with_duplicates(r_item) | texts)},
    optional={"store": either(st.booleans()), "previous_response_id": either(st.sampled_from(["resp_1", "resp_2", ""])),
              "model": either(st.just("gpt-5")), "include": either(fresh(["reasoning.encrypted_content"])), "stream": json_values,
              "tools": either(st.lists(st.fixed_dictionaries({"type": either(st.sampled_from(["function", "custom"])), "name": either(st.just("f"))}),
                                       max_size=2))},
)
responses_answers = st.fixed_dictionaries(
    {"output": either(st.lists(r_item, max_size=4))},
    optional={"id": either(st.sampled_from(["resp_1", "resp_2"])), "object": either(st.just("response"))},
)


# --- Messages: messages of blocks -------------------------------------------------------------------------

TOOL_IDS = either(st.sampled_from(["toolu_1", "toolu_2", "toolu_3", "call:1", "srvtoolu_1", ""]))
m_text = st.fixed_dictionaries({"type": st.just("text")}, optional={"text": either(texts), "citations": json_values, "cache_control": json_values})
m_thinking = st.fixed_dictionaries({"type": st.just("thinking")},
                                   optional={"thinking": either(texts), "signature": either(st.sampled_from(["sig1", "sig2", ""]))})
m_redacted = st.fixed_dictionaries({"type": st.just("redacted_thinking")}, optional={"data": either(texts)})
m_use = st.fixed_dictionaries(
    {"type": st.just("tool_use")},
    optional={"id": TOOL_IDS, "name": either(st.sampled_from(["f", "g"])),
              "input": either(st.dictionaries(texts, scalars, max_size=2) | fresh('{"a": 1}', "{")), "index": json_values},
)
m_server_use = st.fixed_dictionaries({"type": st.just("server_tool_use")},
                                     optional={"id": TOOL_IDS, "name": either(st.just("web_search")), "input": json_values})
m_server_result = st.fixed_dictionaries({"type": st.just("web_search_tool_result")}, optional={"tool_use_id": TOOL_IDS, "content": json_values})
m_result = st.fixed_dictionaries(
    {"type": st.just("tool_result")},
    optional={"tool_use_id": TOOL_IDS, "content": either(texts | st.lists(m_text, max_size=2)), "is_error": either(st.booleans())},
)
m_unknown = st.fixed_dictionaries({"type": either(texts)}, optional={"id": TOOL_IDS, "tool_use_id": TOOL_IDS, "text": json_values})
m_block = st.one_of(m_text, m_thinking, m_redacted, m_use, m_use, m_server_use, m_server_result, m_result, m_result, m_unknown, json_values)
m_message = st.fixed_dictionaries({"role": either(st.sampled_from(["user", "assistant"]))}, optional={"content": either(texts | with_duplicates(m_block))})
THINKING = fresh({"type": "enabled", "budget_tokens": 1024}, {"type": "adaptive"}, {"type": "disabled"})
messages_bodies = st.fixed_dictionaries(
    {"messages": either(with_duplicates(st.one_of(m_message, m_message, m_message, json_values)))},
    optional={"thinking": either(THINKING), "model": either(st.just("claude-x")), "system": either(texts), "stream": json_values,
              "tools": either(st.lists(st.fixed_dictionaries({"name": either(st.sampled_from(["f", "g"]))},
                                                            optional={"type": either(st.sampled_from(["custom", "web_search_20250305"]))}), max_size=2))},
)
messages_answers = st.fixed_dictionaries(
    {"content": either(st.lists(m_block, max_size=4))},
    optional={"id": either(st.just("msg_1")), "type": either(st.just("message")), "role": either(st.just("assistant"))},
)


# --- the engine -------------------------------------------------------------------------------------------


def remembered(dialect: Dialect, body: dict[str, Any]) -> dict[str, Turn]:
    """What memory would hold had the upstream emitted the history's own items (Responses) or assistant blocks
    (Messages), captured the way the proxy captures answers: every call the body mentions may then be recalled."""
    history = body.get(dialect.history_key)
    entries = history if type(history) is list else []
    if dialect is RESPONSES:
        turns = responses_turns(orjson.dumps({"id": "resp_1", "output": entries}))
    else:
        blocks = [block for entry in entries if type(entry) is dict and type(entry.get("content")) is list for block in entry["content"]]
        turns = messages_turns(orjson.dumps({"id": "msg_1", "content": blocks}))
    return {key: turn for turn in turns for key in call_ids(turn)}


def repaired(dialect: Dialect, body: dict[str, Any], name: str, policy: Policy, memory: dict[str, Turn]) -> Result | None:
    """The endpoint's steps without I/O: plan, recall what the plan asks for, repair (None: nothing to repair)."""
    planned = dialect.plan(body, dialect.profile(name))
    if planned is None:
        return None
    return planned.repair({key: memory[key] for key in planned.recall if key in memory}, policy)


def check_engine(dialect: Dialect, body: dict[str, Any], memory: dict[str, Turn]) -> None:
    """Every profile and policy: no exception, the body untouched, a repair that encodes and is a fixed point."""
    sent = copy.deepcopy(body)
    for name in PROFILE_NAMES:
        for policy in POLICIES:
            result = repaired(dialect, body, name, policy, memory)
            assert body == sent, "the repair changed the request it was given"
            if result is None or not result.changed:
                continue
            encoded = orjson.dumps(result.body)
            again = repaired(dialect, result.body, name, policy, memory)
            assert again is None or (again.rejected is None and not again.changed), (name, policy, again)
            assert orjson.dumps(result.body) == encoded, "the second repair changed the first one's body"


@ENGINE
@given(body=responses_bodies, memory=st.booleans())
# Found by this property (tests/unit/dialects/responses/test_rules.py pins them): an id that is a list raised in TM401; a call
# resent twice with previous_response_id got an output for a renamed copy nobody had; a local shell output's id
# (its call's) deleted by TM403.
@example(body={"input": [{"type": "apply_patch_call", "call_id": "c1", "id": []}], "previous_response_id": "resp_1"}, memory=True)
@example(body={"input": [{"type": "apply_patch_call", "call_id": "c1", "id": "fc_1"}] * 2, "previous_response_id": "resp_1"}, memory=True)
@example(body={"input": [{"type": "function_call_output", "call_id": "c1", "id": "x"}, {"type": "local_shell_call_output", "id": "x"}]},
         memory=False)
def test_responses_engine_never_raises_and_repairs_once(body: dict[str, Any], memory: bool) -> None:
    check_engine(RESPONSES, body, remembered(RESPONSES, body) if memory else {})


@ENGINE
@given(body=messages_bodies, memory=st.booleans())
def test_messages_engine_never_raises_and_repairs_once(body: dict[str, Any], memory: bool) -> None:
    check_engine(MESSAGES, body, remembered(MESSAGES, body) if memory else {})


# --- the HTTP layer ---------------------------------------------------------------------------------------

OPENAI_ERROR_KEYS = {"message", "type", "param", "code"}


def payloads(bodies: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[bytes]:
    """What a client may send: a generated body, any JSON value (an array, a number...), or any bytes."""
    return st.one_of(bodies.map(orjson.dumps), bodies.map(orjson.dumps), json_values.map(orjson.dumps), st.binary(max_size=100))


def check_error_shape(dialect: Dialect, answer: httpx.Response) -> None:
    """The proxy's own error, as the protocol's clients read errors."""
    error = answer.json()
    if dialect is MESSAGES:
        assert error["type"] == "error" and set(error) == {"type", "error"}, error
        assert set(error["error"]) == {"type", "message"} and all(type(value) is str for value in error["error"].values()), error
    else:
        assert set(error) == {"error"} and set(error["error"]) == OPENAI_ERROR_KEYS, error


async def check_http(dialect: Dialect, path: str, payload: bytes, upstream_answer: dict[str, Any]) -> str:
    """One payload through a fresh proxy (empty memory) to an upstream that answers 200: that answer relayed as
    sent, or the proxy's own 4XX in the dialect's shape with nothing forwarded. Returns what happened."""
    content = orjson.dumps(upstream_answer)
    with respx.mock(base_url=UPSTREAM, assert_all_called=False) as upstream:
        route = upstream.post(path).mock(return_value=httpx.Response(200, content=content, headers={"content-type": "application/json"}))
        async with running_proxy() as proxy:
            answer = await proxy.client.post("/v1" + path, content=payload, headers={"content-type": "application/json"})
    assert answer.status_code < 500, answer.text
    if answer.status_code != 200:
        assert route.call_count == 0
        check_error_shape(dialect, answer)
        return f"refused by the proxy ({answer.status_code})"
    assert route.call_count == 1 and answer.content == content
    return "repaired" if "x-toolmend-repairs" in answer.headers else "sent as is"


@HTTP
@given(payload=payloads(responses_bodies), upstream_answer=responses_answers)
async def test_http_responses_never_5xx(payload: bytes, upstream_answer: dict[str, Any]) -> None:
    event(await check_http(RESPONSES, RESPONSES.path, payload, upstream_answer))


@HTTP
@given(payload=payloads(messages_bodies), upstream_answer=messages_answers, path=st.sampled_from(MESSAGES.paths))
async def test_http_messages_never_5xx(payload: bytes, upstream_answer: dict[str, Any], path: str) -> None:
    event(await check_http(MESSAGES, path, payload, upstream_answer))


# --- Gemini: contents, with the repair core's library entry (plan(body, profile, target)) --------------------------
# Generated ``contents`` lists (valid parts, broken orders, duplicate ids, calls and responses with and without ids and
# names, signatures, any JSON type in any field, unknown roles), with or without the remembered turns of their own
# model contents, for a target that checks signatures and takes ids and one that does neither, under every orphan and
# thinking policy and the dummy-signature opt-in.

#: A target that checks signatures and takes ids, and one that does neither.
GEMINI_TARGETS = (GeminiTarget("developer", "gemini-3-pro-preview"), GeminiTarget("vertex", "gemini-2.5-pro"))
GEMINI_POLICIES = (*(Policy(orphans=orphans) for orphans in ORPHAN_POLICIES), Policy(thinking="reject"), Policy(dummy_signatures=True))

G_IDS = either(st.sampled_from(["c1", "c2", "c3", ""]))
G_NAMES = either(st.sampled_from(["f", "g", ""]))
g_call = st.fixed_dictionaries({"name": G_NAMES}, optional={"args": either(st.dictionaries(st.sampled_from("ab"), json_values, max_size=2)),
                                                        "id": G_IDS})
g_response = st.fixed_dictionaries({"name": G_NAMES}, optional={"response": json_values, "id": G_IDS})
G_SIGNATURES = either(st.sampled_from(["c2lnMQ==", "c2lnMg==", "skip_thought_signature_validator", ""]))
g_part = st.one_of(
    st.fixed_dictionaries({"functionCall": either(g_call)}, optional={"thoughtSignature": G_SIGNATURES}),
    st.fixed_dictionaries({"functionResponse": either(g_response)}),
    st.fixed_dictionaries({"text": either(texts)}, optional={"thought": either(st.booleans()), "thoughtSignature": G_SIGNATURES}),
    st.fixed_dictionaries({"inlineData": json_values}),
    st.just({}),
    json_values,
)
g_content = st.fixed_dictionaries({}, optional={"role": either(st.sampled_from(["user", "model", "function", "tool", "assistant", "system"])),
                                              "parts": either(with_duplicates(g_part))})
gemini_bodies = st.fixed_dictionaries({"contents": either(with_duplicates(st.one_of(g_content, g_content, g_content, json_values)))},
                               optional={"tools": either(st.lists(st.fixed_dictionaries({"functionDeclarations": st.lists(
                                   st.fixed_dictionaries({"name": G_NAMES}), max_size=2)}), max_size=1))})


def gemini_remembered(body: dict[str, Any]) -> dict[str, Turn]:
    """What memory would hold had the upstream answered with the body's own model contents."""
    contents = body.get("contents")
    memory: dict[str, Turn] = {}
    for entry in contents if type(contents) is list else ():
        parts = entry.get("parts") if type(entry) is dict else None
        if type(parts) is list and (ids := turn_ids(parts)):
            turn: Turn = {"dialect": "gemini", "parts": copy.deepcopy([p for p in parts if type(p) is dict]), "ids": ids}
            memory.update(dict.fromkeys(ids, turn))
    return memory


def gemini_repaired(body: dict[str, Any], target: GeminiTarget, policy: Policy, memory: dict[str, Turn]) -> Result | None:
    planned = gemini_plan(body, gemini_profile(target.family), target)
    if planned is None:
        return None
    return planned.repair({key: memory[key] for key in planned.recall if key in memory}, policy)


@ENGINE
@given(body=gemini_bodies, memory=st.booleans())
# Found by this property: responses the orphan policy dropped from between two model contents left them side by side.
@example(body={"contents": [{"role": "model", "parts": [{"text": "a"}, {"functionResponse": {"name": "f"}}]},
                            {"role": "model", "parts": [{"text": "b"}, {"functionResponse": {"name": "f"}}]}]}, memory=False)
def test_gemini_engine_never_raises_and_repairs_once(body: dict[str, Any], memory: bool) -> None:
    turns = gemini_remembered(body) if memory else {}
    sent = copy.deepcopy(body)
    for target in GEMINI_TARGETS:
        for policy in GEMINI_POLICIES:
            result = gemini_repaired(body, target, policy, turns)
            assert body == sent, "the repair changed the request it was given"
            if result is None or not result.changed:
                continue
            encoded = orjson.dumps(result.body)
            again = gemini_repaired(result.body, target, policy, turns)
            assert again is None or (again.rejected is None and not again.changed), (target, policy, again)
            assert orjson.dumps(result.body) == encoded, "the second repair changed the first one's body"
