"""TM614: a history that ends with the model's text goes as sent unless the operator opts in to continue it."""

from typing import Any

import orjson
import pytest
import respx

from proxy.dialects import GEMINI
from proxy.dialects.gemini.plan import plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.rules.trailing_model_content import CONTINUE_TEXT
from proxy.dialects.gemini.target import GeminiTarget
from proxy.repair import Policy, Result
from tests.support.gemini_validator import check
from tests.support.proxy_fixtures import make_settings, running_proxy

G25 = GeminiTarget("developer", "gemini-2.5-flash")
OPTED_IN = Policy(continue_model_turn=True)
Q = {"role": "user", "parts": [{"text": "Write a haiku about rain."}]}
PREFILL = {"role": "model", "parts": [{"text": "Soft rain on the roof,"}]}
CONTINUE = {"role": "user", "parts": [{"text": CONTINUE_TEXT}]}


def repair(body: dict[str, Any], policy: Policy) -> Result:
    planned = plan(body, gemini_profile("gemini"), G25, policy)
    return Result(body, ()) if planned is None else planned.repair({}, policy)


def test_a_prefill_goes_as_sent_by_default() -> None:
    body = {"contents": [Q, PREFILL]}
    assert check(body, G25) is None  # the Developer API as the catalogue knows it today
    result = repair(body, Policy())
    assert result.body is body and result.findings == ()


def test_opted_in_a_prefill_is_followed_by_a_user_content_the_model_text_kept() -> None:
    body = {"contents": [Q, PREFILL]}
    assert check(body, G25, prefill=False).rule == "GN-6"  # type: ignore[union-attr]
    result = repair(body, OPTED_IN)
    assert result.body["contents"] == [Q, PREFILL, CONTINUE]
    assert result.body["contents"][1] is PREFILL
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM614", 1, "inserted")]
    assert body["contents"] == [Q, PREFILL]  # the request as given is not edited
    assert check(result.body, G25, prefill=False) is None


def test_opted_in_a_trailing_call_content_is_answered_not_continued() -> None:
    calls = {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    result = repair({"contents": [Q, calls]}, OPTED_IN)
    assert [f.code for f in result.findings] == ["TM104"]
    assert check(result.body, G25, prefill=False) is None


@pytest.mark.parametrize("opted_in", [False, True], ids=["default", "opted-in"])
def test_the_policy_reaches_the_plan(opted_in: bool) -> None:
    """Off, a prefill is a valid request: not planned at all (its bytes go as sent), not planned and then left as is."""
    body = {"contents": [Q, PREFILL]}
    planned = GEMINI.plan(body, gemini_profile("gemini"), None, Policy(continue_model_turn=opted_in))
    if not opted_in:
        assert planned is None
        return
    assert planned is not None
    assert planned.repair({}, OPTED_IN).body["contents"] == [Q, PREFILL, CONTINUE]


def test_opted_in_a_history_ending_with_the_user_needs_nothing() -> None:
    assert plan({"contents": [Q, PREFILL, CONTINUE]}, gemini_profile("gemini"), G25) is None


GEMINI_UPSTREAM = "http://upstream.test"
ENDPOINT = "/v1beta/models/gemini-2.5-flash:generateContent"
ANSWER = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Drops drum on the tin."}]}, "finishReason": "STOP"}]}


@pytest.mark.parametrize("opted_in", [False, True], ids=["default", "opted-in"])
async def test_the_setting_reaches_the_repair_of_a_served_request(opted_in: bool) -> None:
    sent = orjson.dumps({"contents": [Q, PREFILL]})
    settings = make_settings(upstream=GEMINI_UPSTREAM, continue_model_turn=opted_in)
    with respx.mock(base_url=GEMINI_UPSTREAM) as upstream:
        route = upstream.post(ENDPOINT).respond(200, json=ANSWER)
        async with running_proxy(settings) as proxy:
            answer = await proxy.client.post(ENDPOINT, content=sent, headers={"x-goog-api-key": "k", "content-type": "application/json"})
    assert answer.status_code == 200
    forwarded = route.calls.last.request.content
    if opted_in:
        assert orjson.loads(forwarded)["contents"] == [Q, PREFILL, CONTINUE]
        assert answer.headers["x-toolmend-repairs"] == "TM614=1"
    else:
        assert forwarded == sent and "x-toolmend-repairs" not in answer.headers
