"""TM304 only for a request that is, or may be, in thinking mode: DeepSeek and Kimi take a tool-call turn without
``reasoning_content`` outside it (DS-3, KI-4), and a request they take goes upstream untouched.

Each body is judged twice: by the engine (profile ``deepseek``), and by the DeepSeek validator, an independent
reading of when the provider refuses it. The rule changes a body exactly when the validator refuses it as sent.
"""

import pytest

from proxy.repair import plan, repair
from tests.support.provider_validators import provider_violations

USER = {"role": "user", "content": "Weather?"}
CALLS = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                                               "function": {"name": "weather", "arguments": "{}"}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
THOUGHT = {"role": "assistant", "content": "Sunny.", "reasoning_content": "Read the result."}


def body(model: str, *earlier: dict, **settings: object) -> dict:
    return {"model": model, "messages": [USER, *earlier, CALLS, RESULT], **settings}


THINKING = {
    "deepseek-reasoner": body("deepseek-reasoner"),
    "deepseek-v4-pro": body("deepseek-v4-pro"),
    "kimi-k2-thinking": body("kimi-k2-thinking"),
    "kimi-k2.5": body("kimi-k2.5"),
    "thinking enabled": body("deepseek-chat", thinking={"type": "enabled"}),
    "reasoning_content in the history": body("deepseek-chat", THOUGHT, USER),
}
NOT_THINKING = {
    "qwen3-coder-plus": body("qwen3-coder-plus"),
    "deepseek-chat": body("deepseek-chat"),
    "kimi-k2-0905-preview": body("kimi-k2-0905-preview"),
    "thinking disabled": body("deepseek-reasoner", thinking={"type": "disabled"}),
    "thinking disabled over the history": body("deepseek-v4-pro", THOUGHT, USER, thinking={"type": "disabled"}),
}


@pytest.mark.parametrize("sent", THINKING.values(), ids=THINKING.keys())
def test_a_thinking_request_gets_reasoning_content_on_every_call_turn(sent: dict) -> None:
    assert provider_violations(sent, "deepseek")
    result = repair(sent, profile="deepseek")
    assert [finding.code for finding in result.findings] == ["TM304"]
    assert result.body["messages"][-2] == {**CALLS, "reasoning_content": ""}
    assert provider_violations(result.body, "deepseek") == []


@pytest.mark.parametrize("sent", NOT_THINKING.values(), ids=NOT_THINKING.keys())
def test_a_request_outside_thinking_mode_goes_as_sent(sent: dict) -> None:
    assert provider_violations(sent, "deepseek") == []
    assert plan(sent, "deepseek") is None  # the fast check asks the rule's own question
    assert repair(sent, profile="deepseek").body is sent


def test_a_request_with_no_model_may_think() -> None:
    result = repair({"messages": [USER, CALLS, RESULT]}, profile="deepseek")
    assert [finding.code for finding in result.findings] == ["TM304"]


def test_outside_thinking_mode_the_other_repairs_still_run_without_adding_reasoning() -> None:
    sent = body("qwen3-coder-plus")
    sent["messages"].insert(1, {"role": "tool", "tool_call_id": "call_0", "content": "orphan"})
    result = repair(sent, profile="deepseek")
    assert "TM304" not in {finding.code for finding in result.findings}
    assert all("reasoning_content" not in message for message in result.body["messages"])
