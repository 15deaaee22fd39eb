"""Chat profiles: what each provider takes, so that a repair changes only what it would refuse.

Gemini sets no length on call ids (only OpenAI and Azure do, E-ID-40), and LiteLLM in front of Gemini carries each
call's thought signature inside its id (``call_<id>__thought__<signature>``), taking it back off before Gemini sees
it: a repair for profile ``gemini`` keeps such an id whole, where one for ``openai`` must shorten it.
"""

from proxy.dialects.chat.plan import plan
from proxy.dialects.chat.profiles import PROFILES
from tests.support.provider_validators import provider_violations

#: A call id as LiteLLM returns it for a Gemini 3 call: the id, the separator, the signature (base64).
LITELLM_ID = "call_6f1a2b__thought__" + "CsUBAdHtim9f" * 12
USER = {"role": "user", "content": "Weather in Paris and Oslo?"}
#: The longest call id OpenAI and Azure take (E-ID-40).
MAX_ID_LENGTH = PROFILES["openai"].max_id_length


def calls_and_one_result() -> dict:
    first = {"id": LITELLM_ID, "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
    second = {"id": "call_b", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    return {"model": "gemini-3-pro-preview", "messages": [
        USER, {"role": "assistant", "content": "", "tool_calls": [first, second]},
        {"role": "tool", "tool_call_id": LITELLM_ID, "content": "18C"}]}


def test_a_signature_carried_in_the_call_id_survives_a_gemini_repair() -> None:
    body = calls_and_one_result()
    assert len(LITELLM_ID) > MAX_ID_LENGTH
    planned = plan(body, "gemini")
    assert planned is not None
    result = planned.repair({})
    assert [f.code for f in result.findings] == ["TM104"]  # the unanswered call_b, nothing else
    messages = result.body["messages"]
    assert messages[1]["tool_calls"][0]["id"] == LITELLM_ID and messages[2]["tool_call_id"] == LITELLM_ID
    assert provider_violations(result.body, "gemini") == []


def test_openai_still_gets_ids_it_takes() -> None:
    planned = plan(calls_and_one_result(), "openai")
    assert planned is not None
    result = planned.repair({})
    assert "TM208" in {f.code for f in result.findings}
    assert all(len(call["id"]) <= MAX_ID_LENGTH for call in result.body["messages"][1]["tool_calls"])
