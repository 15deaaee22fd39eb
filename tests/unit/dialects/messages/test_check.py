"""The Messages repair visits only the messages a rule may change: held to the rules it stands in for.

After the structural rules, the Messages rules that edit one message at a time (TM502-TM509) run only over the
pending messages: the client's own that the check marked (``Inspection.marked``) and the ones the view rebuilt
that ``check.may_change`` says a rule may change. Like chat's clean check is held to its rules, both are held
here to every such rule, over messages made of any blocks (odd shapes too: a typeless block with ``index``, a
``tool_use`` in a user message, a ``tool_result`` in an assistant one, blocks that are not objects): a message
they pass over is one that no rule changes. And the repair with them is the repair that walks every message.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.dialects.messages import MESSAGES
from proxy.dialects.messages.blocks import is_tool_use
from proxy.dialects.messages.check import inspect, may_change
from proxy.dialects.messages.plan import MessagesPlan
from proxy.dialects.messages.rules import (
    altered_thinking,
    content_after_tool_use,
    empty_text,
    empty_thinking,
    non_object_input,
    stream_keys,
    thinking_not_first,
    trailing_thinking,
    unsigned_thinking,
)
from proxy.dialects.messages.rules.edit import blocks
from proxy.dialects.messages.view import is_message
from proxy.repair import Policy
from proxy.repair.context import Context
from proxy.repair.profile import Profile
from tests.support.hypothesis_budget import examples

PROFILES = (MESSAGES.profile("anthropic"), MESSAGES.profile("deepseek"))
#: The rules ``marked`` and ``may_change`` stand in for, in the order they run.
ONE_AT_A_TIME = (stream_keys, non_object_input, empty_text, empty_thinking, unsigned_thinking, trailing_thinking,
                 content_after_tool_use, thinking_not_first)
IDS = ("toolu_01", "toolu_02", "toolu_03", "functions.run:0", "")

TEXT = st.builds(lambda text: {"type": "text", "text": text}, st.sampled_from(("", "hi", " ")))
THINKING = st.builds(lambda text, signature: {"type": "thinking", "thinking": text, **signature},
                     st.sampled_from(("", "hmm")), st.sampled_from(({}, {"signature": ""}, {"signature": "c2ln"}, {"signature": None})))
REDACTED = st.just({"type": "redacted_thinking", "data": "EmwK"})
TOOL_USE = st.builds(lambda cid, value: {"type": "tool_use", "id": cid, "name": "run", **value}, st.sampled_from(IDS),
                     st.sampled_from(({"input": {}}, {"input": {"a": 1}}, {"input": '{"a": 1}'}, {"input": ""}, {"input": None},
                                      {"input": [1]}, {})))
RESULT_CONTENT = st.sampled_from(("18C", "", None, [], [{"type": "text", "text": "18C"}], [{"type": "text", "text": ""}],
                                  [{"type": "text", "text": "a"}, {"type": "text", "text": ""}], [{"type": "image"}], [{"text": ""}]))
TOOL_RESULT = st.builds(lambda cid, content: {"type": "tool_result", "tool_use_id": cid, "content": content},
                        st.sampled_from((*IDS, None)), RESULT_CONTENT)
ODD = st.sampled_from(({"index": 0}, {"type": 5}, {"type": None, "text": ""}, {"type": ["thinking"]}, "text", 7, None,
                       {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
                       {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}, {"type": "image"}))
BLOCK = st.one_of(TEXT, THINKING, REDACTED, TOOL_USE, TOOL_RESULT, ODD)
STREAMED = st.builds(lambda block, index: {**block, "index": 0} if index and type(block) is dict else block, BLOCK, st.booleans())
MESSAGE = st.one_of(
    st.builds(lambda role, content: {"role": role, "content": content}, st.sampled_from(("user", "assistant")),
              st.one_of(st.lists(STREAMED, max_size=6), st.sampled_from(("", "hi")))),
    st.sampled_from(({"role": "system", "content": ""}, {"role": "user", "content": None}, {"role": "assistant", "content": {"a": 1}},
                     {"content": []}, "message", 3)),
)
MODES = (None, {"type": "enabled", "budget_tokens": 1024}, {"type": "adaptive"}, {"type": "disabled"})


def config(default: int) -> settings:
    return settings(max_examples=examples(default), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def changed_by_a_rule(message: Any, position: int, profile: Profile) -> list[str]:
    """The codes of the one-message rules that change ``message``, each run alone over it as the client's."""
    codes = []
    for rule in ONE_AT_A_TIME:
        if rule is unsigned_thinking and rule not in profile.rules:
            continue
        history = [copy.deepcopy(message)]
        ctx = Context(history, {}, Policy(), profile, {id(history[0]): position}, {"messages": list(history)})
        rule.apply(ctx)
        codes += [finding.code for finding in ctx.findings]
    return codes


@config(600)
@given(st.lists(MESSAGE, min_size=1, max_size=8), st.sampled_from(PROFILES), st.sampled_from(MODES))
def test_the_check_marks_every_message_a_one_message_rule_changes(messages: list[Any], profile: Profile, mode: Any) -> None:
    body: dict[str, Any] = {"model": "claude-strict-test", "max_tokens": 1024, "messages": messages}
    if mode is not None:
        body["thinking"] = mode
    marked = inspect(body, profile).marked
    for position, message in enumerate(messages):
        if position not in marked:
            assert changed_by_a_rule(message, position, profile) == [], (position, message)


@config(600)
@given(MESSAGE, st.sampled_from(PROFILES))
def test_may_change_says_so_of_every_message_a_one_message_rule_changes(message: Any, profile: Profile) -> None:
    if not may_change(message, bool(profile.rules)):
        assert changed_by_a_rule(message, 0, profile) == []
    if not is_message(message):
        assert not may_change(message, bool(profile.rules))


def outcome(plan: MessagesPlan, memory: dict[str, Any], policy: Policy) -> tuple[Any, ...]:
    """The repair's body (with which messages are the client's own objects), findings and refusal."""
    result = plan.repair({key: turn for key, turn in memory.items() if key in plan.recall}, policy)
    sent = plan.body["messages"]
    own = [next((n for n, message in enumerate(sent) if message is written), None) for written in result.body["messages"]]
    return result.body, own, result.findings, result.rejected


TURN = {"dialect": "messages", "ids": ["toolu_02"], "message_id": "msg_02",
        "blocks": [{"type": "thinking", "thinking": "t", "signature": "c2ln"}, {"type": "tool_use", "id": "toolu_02", "name": "run", "input": {}}]}


@config(600)
@given(st.lists(MESSAGE, min_size=1, max_size=10), st.sampled_from(PROFILES), st.sampled_from(MODES),
       st.sampled_from((Policy(), Policy(orphans="drop"), Policy(thinking="reject"))))
def test_the_repair_over_pending_messages_is_the_repair_over_every_message(messages: list[Any], profile: Profile, mode: Any,
                                                                           policy: Policy) -> None:
    body: dict[str, Any] = {"model": "claude-strict-test", "max_tokens": 1024, "messages": messages}
    if mode is not None:
        body["thinking"] = mode
    sent = copy.deepcopy(body)
    planned = MESSAGES.plan(body, profile)
    if planned is None:
        return
    memory = {"toolu_02": TURN}
    assert planned.marked is not None
    assert outcome(planned, memory, policy) == outcome(dataclasses.replace(planned, marked=None), memory, policy)
    assert body == sent


@config(400)
@given(st.lists(MESSAGE, min_size=1, max_size=8), st.sampled_from(PROFILES), st.sampled_from(MODES))
def test_the_check_asks_memory_for_the_calls_of_the_latest_message_with_signed_thinking(messages: list[Any], profile: Profile,
                                                                                         mode: Any) -> None:
    # TM516 (AM-13) can only tell altered thinking from memory: the one pass must want what the rule will look up.
    body: dict[str, Any] = {"model": "claude-strict-test", "max_tokens": 1024, "messages": messages}
    if mode is not None:
        body["thinking"] = mode
    latest = altered_thinking._latest(messages)
    content = blocks(messages[latest]) if latest is not None else []
    if not any(altered_thinking.signed(block) is not None for block in content):
        return
    calls = [cid for block in content if is_tool_use(block) and type(cid := block.get("id")) is str]
    planned = MESSAGES.plan(body, profile)
    assert planned is not None
    assert set(calls) <= set(planned.recall)


def test_signed_thinking_of_an_earlier_assistant_message_is_not_looked_up() -> None:
    signed = {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
                                               {"type": "tool_use", "id": "toolu_01", "name": "run", "input": {}}]}
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}
    body = {"model": "claude-strict-test", "max_tokens": 1024, "messages": [
        {"role": "user", "content": "hi"}, signed, result, {"role": "assistant", "content": "Done."}, {"role": "user", "content": "thanks"}]}
    assert MESSAGES.plan(body, MESSAGES.profile("anthropic")) is None
    body["messages"] = body["messages"][:3]
    planned = MESSAGES.plan(body, MESSAGES.profile("anthropic"))
    assert planned is not None and planned.recall == ["toolu_01"]
