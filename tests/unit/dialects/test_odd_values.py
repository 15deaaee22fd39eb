"""A value of the wrong JSON type anywhere in a history: every dialect's check and repair take it without raising.

Clients send what they send: an ``id`` that is a list, a ``type`` that is an object, a ``tool_use_id`` that is a
number. Such a request is the upstream's to refuse (it says what is wrong, in its own words); toolmend must neither
crash on it (a 500 instead of the upstream's 400) nor lose it. Each case puts one odd value in one field of an
otherwise plausible history, under every orphan policy, and plans and repairs it. Found by this table: a Responses
item whose ``id`` or ``type`` was a list or an object raised ``TypeError`` in the fast check.
"""

from collections.abc import Iterator
from typing import Any

import pytest

from proxy.dialects import CHAT, MESSAGES, RESPONSES
from proxy.dialects.dialect import Dialect
from proxy.repair import Policy

ODD = ([1], {"a": 1}, 1, None, True, 1.5, "")
POLICIES = (Policy(), Policy(orphans="drop"), Policy(orphans="reject"))


def responses_bodies(odd: Any) -> Iterator[dict[str, Any]]:
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "o"}
    for kind in ("message", "function_call", "function_call_output", "reasoning", "item_reference", "local_shell_call_output"):
        for field in ("id", "call_id", "type", "role", "encrypted_content", "output", "content"):
            item = {"type": kind, "role": "assistant", "call_id": "c1", "id": "fc_1", "content": "x", field: odd}
            for before in ([call], [{"type": "reasoning", "id": "rs_1", "summary": []}], []):
                for store in (True, False):
                    yield {"input": [*before, item, output, item], "store": store}
            yield {"previous_response_id": odd if field == "id" else "resp_1", "input": [item]}
    yield {"input": odd, "store": odd, "previous_response_id": odd}


def messages_bodies(odd: Any) -> Iterator[dict[str, Any]]:
    call = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    for kind in ("tool_use", "tool_result", "text", "thinking", "redacted_thinking", "server_tool_use"):
        for field in ("id", "tool_use_id", "type", "name", "input", "content", "text", "signature", "thinking", "index"):
            block = {"type": kind, "id": "t1", "tool_use_id": "t1", "name": "f", "input": {}, "text": "x", "thinking": "y",
                     "signature": "s", field: odd}
            for messages in ([{"role": "assistant", "content": [block]}, {"role": "user", "content": [block]}],
                             [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [call]}, {"role": "user", "content": [block]}],
                             [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [block, {**call, "id": "t2"}]},
                              {"role": "user", "content": [{"type": "text", "text": "a"}, block]}]):
                yield {"messages": messages, "thinking": {"type": "enabled", "budget_tokens": 1024}}
                yield {"messages": messages}
    for field in ("role", "content"):
        yield {"messages": [{"role": "assistant", "content": "x", field: odd}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}]}
    yield {"messages": [{"role": "user", "content": "x"}], "thinking": odd}
    yield {"messages": odd}


def chat_bodies(odd: Any) -> Iterator[dict[str, Any]]:
    for field in ("id", "type", "function", "name", "arguments"):
        call: dict[str, Any] = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        if field in ("name", "arguments"):
            call["function"][field] = odd
        else:
            call[field] = odd
        yield {"messages": [{"role": "assistant", "tool_calls": [call]}, {"role": "tool", "tool_call_id": odd, "content": odd},
                            {"role": "tool", "tool_call_id": "c1", "content": "x"}]}


CASES = ((RESPONSES, ("openai", "deepseek"), responses_bodies), (MESSAGES, ("anthropic", "deepseek"), messages_bodies),
         (CHAT, ("openai", "mistral"), chat_bodies))


@pytest.mark.parametrize("odd", ODD, ids=repr)
@pytest.mark.parametrize(("dialect", "profiles", "bodies"), CASES, ids=lambda case: getattr(case, "name", None))
def test_an_odd_value_is_planned_and_repaired_without_raising(dialect: Dialect, profiles: tuple[str, ...], bodies: Any, odd: Any) -> None:
    planned = 0
    for body in bodies(odd):
        for name in profiles:
            plan = dialect.plan(body, dialect.profile(name))
            if plan is None:
                continue
            planned += 1
            for policy in POLICIES:
                result = plan.repair({}, policy)
                assert result.rejected is not None or result.changed or result.body is body
    assert planned, "some of these histories are broken: the table must reach the rules"
