"""TM312 only where OpenRouter would refuse: a Gemini 3 model, a call turn of the current turn whose remembered
``reasoning_details`` the client dropped. The list comes back from memory whole; nothing is ever made up.

Each body is judged twice: by the engine (profile ``openrouter``), and by the OpenRouter validator, an independent
reading of when the provider refuses it (GE-8), told what the upstream emitted.
"""

import orjson
import pytest

from proxy.dialects.chat.plan import plan, repair
from proxy.dialects.chat.profiles import route_profile
from proxy.dialects.messages import MESSAGES
from proxy.dialects.responses import RESPONSES
from proxy.turns import make_turn
from tests.support.provider_validators import provider_violations

GEMINI_3 = "google/gemini-3-pro-preview"
USER = {"role": "user", "content": "Weather in Paris and Oslo?"}
CALL_A = {"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
CALL_B = {"id": "call_b", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
DETAILS = [
    {"type": "reasoning.text", "text": "Two cities: two calls.", "format": "google-gemini-v1", "index": 0},
    {"type": "reasoning.encrypted", "data": "CiQB0e2Kb7xWq9L+c2ln", "id": "tool_call_a", "format": "google-gemini-v1",
     "index": 0},
]
LATER = [{"type": "reasoning.encrypted", "data": "Q2lRQjBlMktiN3hX", "id": "tool_call_c", "format": "google-gemini-v1",
          "index": 0}]
CALL_C = {"id": "call_c", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lima"}'}}
RECALLED = {"call_a": make_turn([CALL_A, CALL_B], None, None, DETAILS), "call_b": make_turn([CALL_A, CALL_B], None, None, DETAILS),
            "call_c": make_turn([CALL_C], None, None, LATER)}
EMITTED = {"call_a": DETAILS, "call_b": DETAILS, "call_c": LATER}


def calls(*items: dict, **fields: object) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": list(items), **fields}


def tool(cid: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": "18C"}


def body(*messages: dict, model: str = GEMINI_3) -> dict:
    return {"model": model, "messages": [USER, *messages]}


def test_the_dropped_list_comes_back_on_every_step_of_the_current_turn() -> None:
    sent = body(calls(CALL_A, CALL_B), tool("call_a"), tool("call_b"), calls(CALL_C), tool("call_c"))
    assert provider_violations(sent, "openrouter", emitted_signatures=EMITTED)[0].rule == "GE-8"
    planned = plan(sent, "openrouter")
    assert planned is not None and {"call_a", "call_c"} <= set(planned.recall)
    result = planned.repair(RECALLED)
    assert [(f.code, f.action) for f in result.findings] == [("TM312", "restored")] * 2
    messages = result.body["messages"]
    assert messages[1] == calls(CALL_A, CALL_B, reasoning_details=DETAILS)
    assert messages[4] == calls(CALL_C, reasoning_details=LATER)
    assert orjson.dumps(messages[1]["reasoning_details"]) == orjson.dumps(DETAILS)  # byte for byte
    assert provider_violations(result.body, "openrouter", emitted_signatures=EMITTED) == []


@pytest.mark.parametrize("dropped", [{}, {"reasoning_details": None}, {"reasoning_details": []}], ids=["absent", "null", "empty"])
def test_a_turn_without_details_is_any_of_absent_null_or_empty(dropped: dict) -> None:
    result = repair(body(calls(CALL_A, CALL_B, **dropped), tool("call_a"), tool("call_b")), RECALLED, profile="openrouter")
    assert result.body["messages"][1]["reasoning_details"] == DETAILS


def test_nothing_is_made_up_when_memory_holds_no_list() -> None:
    sent = body(calls(CALL_A, CALL_B), tool("call_a"), tool("call_b"))
    without = {cid: make_turn([CALL_A, CALL_B]) for cid in ("call_a", "call_b")}
    for recalled in ({}, without):
        result = repair(sent, recalled, profile="openrouter")
        assert result.findings == () and result.body["messages"] == sent["messages"]


def test_a_list_the_client_kept_is_never_touched() -> None:
    kept = [{"type": "reasoning.encrypted", "data": "a2VwdA==", "format": "google-gemini-v1", "index": 0}]
    sent = body(calls(CALL_A, CALL_B, reasoning_details=kept), tool("call_a"), tool("call_b"))
    assert plan(sent, "openrouter") is None
    assert repair(sent, RECALLED, profile="openrouter").body is sent


def test_earlier_turns_are_left_as_sent() -> None:
    # Gemini validates the current turn only (since the last user message): an older call turn goes as the client sent it.
    sent = body(calls(CALL_A, CALL_B), tool("call_a"), tool("call_b"), {"role": "assistant", "content": "18C both."},
                {"role": "user", "content": "Thanks"})
    assert provider_violations(sent, "openrouter", emitted_signatures=EMITTED) == []
    assert plan(sent, "openrouter") is None


@pytest.mark.parametrize("model", ["google/gemini-2.5-pro", "anthropic/claude-sonnet-4", "openai/gpt-5", None])
def test_other_models_go_as_sent(model: str | None) -> None:
    sent = body(calls(CALL_A, CALL_B), tool("call_a"), tool("call_b"), model=model)  # type: ignore[arg-type]
    assert provider_violations(sent, "openrouter", emitted_signatures=EMITTED) == []
    assert plan(sent, "openrouter") is None
    assert repair(sent, RECALLED, profile="openrouter").body is sent


@pytest.mark.parametrize("model", ["google/gemini-3-flash-preview", "google/gemini-3.1-pro-preview", "gemini-3-pro", "GOOGLE/Gemini-10-ultra"])
def test_every_gemini_3_or_later_model_concerns_the_rule(model: str) -> None:
    assert plan(body(calls(CALL_A, CALL_B), tool("call_a"), tool("call_b"), model=model), "openrouter") is not None


@pytest.mark.parametrize("profile", ["openai", "gemini", "anthropic"])
def test_other_profiles_never_add_reasoning_details(profile: str) -> None:
    sent = body(calls(CALL_A, CALL_B), tool("call_a"), tool("call_b"))
    result = repair(sent, RECALLED, profile=profile)
    assert all("reasoning_details" not in m for m in result.body["messages"])


def test_openrouter_is_chosen_by_its_host() -> None:
    profile, by_model = route_profile("https://openrouter.ai/api/v1", "auto")
    assert (profile.name, by_model) == ("openrouter", False)


def test_the_other_dialects_keep_what_an_openrouter_host_had_before() -> None:
    # The profile concerns chat histories; OpenRouter's Responses and Messages paths keep OpenAI's and Anthropic's rules.
    assert RESPONSES.profile("openrouter") is RESPONSES.profile("openai")
    assert MESSAGES.profile("openrouter") is MESSAGES.profile("anthropic")


def test_a_call_turn_put_back_for_orphan_results_gets_its_list_too() -> None:
    # A framework that dropped the whole assistant message: TM101 puts the calls back, TM312 the list they came with.
    sent = body(tool("call_a"), tool("call_b"))
    planned = plan(sent, "openrouter")
    assert planned is not None
    result = planned.repair({cid: RECALLED[cid] for cid in planned.recall})
    assert [f.code for f in result.findings] == ["TM101", "TM312"]
    assert result.body["messages"][1]["reasoning_details"] == DETAILS
    assert provider_violations(result.body, "openrouter", emitted_signatures=EMITTED) == []
