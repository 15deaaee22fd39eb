"""Mid-conversation ``system`` messages (OT-1): Claude Code from 2.1.154 sends ``role: "system"`` inside ``messages``.

Anthropic takes it, so on the ``anthropic`` profile the request goes upstream as the client's bytes. DeepSeek's, Kimi's
and Z.AI's Anthropic endpoints refuse it: on the ``deepseek`` and ``zai`` profiles it is folded into the top-level
``system`` (TM514). End to end: the ``anthropic`` SDK's ``beta.messages`` (Claude Code's ``/v1/messages?beta=true``)
through toolmend under uvicorn to the strict scripted upstream playing each server. On chat, only the ``vllm`` profile
(templates that take a system message only first) folds it into the first system message (TM311).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.app import create_app
from proxy.config import Settings
from proxy.dialects.chat.plan import plan, repair
from proxy.dialects.messages import MESSAGES
from proxy.repair import Policy
from tests.support.lazy import lazy
from tests.support.messages_agent import Wire
from tests.support.messages_upstream import make_messages_upstream
from tests.support.messages_validator import ServerState, violations
from tests.support.provider_validators import provider_violations
from tests.support.strict_upstream import serve

anthropic = lazy("anthropic")

#: What Claude Code sends: its system prompt as cached text blocks, the user's message, then harness context as a system
#: message, and a directive that carries only ``output_config``.
SYSTEM = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
AGENTS = {"type": "text", "text": "Available agents: general-purpose, Explore."}
CLAUDE_CODE = {
    "model": "deepseek-v4-pro",
    "max_tokens": 1024,
    "system": SYSTEM,
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]},
        {"role": "system", "content": [AGENTS], "output_config": {"effort": "high"}},
    ],
}
FOLDED = [*SYSTEM, AGENTS]
#: Claude Code's query string (the TypeScript SDK's ``beta.messages``; the Python SDK's adds none, so it is given here).
BETA = {"beta": "true"}
#: The route profile toolmend runs for each strict server.
ROUTE = {"deepseek": "deepseek", "kimi": "deepseek", "zai": "zai"}


def repaired(body: dict[str, Any], route: str) -> dict[str, Any] | None:
    planned = MESSAGES.plan(body, MESSAGES.profile(route))
    return None if planned is None else planned.repair({}, Policy()).body


@pytest.mark.parametrize("server", sorted(ROUTE))
def test_compatible_servers_get_the_system_message_folded_into_the_top_level_system(server: str) -> None:
    assert violations(CLAUDE_CODE, profile=server)  # refused as sent
    sent = repaired(copy.deepcopy(CLAUDE_CODE), ROUTE[server])
    assert sent is not None
    assert sent["system"] == FOLDED and sent["messages"] == CLAUDE_CODE["messages"][:1]
    assert violations(sent, profile=server, state=ServerState()) == []


def test_anthropic_takes_the_system_message_where_it_stands() -> None:
    assert violations(CLAUDE_CODE, profile="anthropic") == []
    assert MESSAGES.plan(CLAUDE_CODE, MESSAGES.profile("anthropic")) is None  # the client's bytes go upstream


@pytest.mark.parametrize(("system", "expected"), [
    (None, [AGENTS]),
    ("You are Claude Code.", [{"type": "text", "text": "You are Claude Code."}, AGENTS]),
    (SYSTEM, FOLDED),
])
def test_the_folded_text_follows_whatever_system_the_client_sent(system: Any, expected: list[Any]) -> None:
    body = {key: value for key, value in CLAUDE_CODE.items() if key != "system"}
    if system is not None:
        body["system"] = system
    sent = repaired(body, "deepseek")
    assert sent is not None and sent["system"] == expected


def test_a_directive_without_text_is_removed_and_several_messages_fold_in_order() -> None:
    body = {**CLAUDE_CODE, "messages": [
        {"role": "user", "content": "Fix it."},
        {"role": "system", "content": "First rule."},
        {"role": "assistant", "content": "On it."},
        {"role": "user", "content": "Go on."},
        {"role": "system", "content": [], "output_config": {"effort": "low"}},
    ]}
    planned = MESSAGES.plan(body, MESSAGES.profile("zai"))
    assert planned is not None
    result = planned.repair({}, Policy())
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM514", 1, "folded"), ("TM514", 4, "removed")]
    assert "output_config dropped" in result.findings[1].detail
    assert result.body["system"] == [*SYSTEM, {"type": "text", "text": "First rule."}]
    assert [m["role"] for m in result.body["messages"]] == ["user", "assistant", "user"]
    assert violations(result.body, profile="zai") == []


@pytest.mark.parametrize("route", ["deepseek", "zai"])
@pytest.mark.parametrize("after", [[], [{"role": "user", "content": "Go on."}]], ids=["prefill", "conversation"])
def test_a_system_message_folded_from_before_an_assistant_message_does_not_leave_it_first(route: str, after: list[Any]) -> None:
    """S12: the client opened its history with a system message; folding it (TM514) must not make the assistant's the
    first message, which a server wanting the user's first refuses. TM515 puts a user message before it."""
    greeting = {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]}
    body = {**CLAUDE_CODE, "messages": [{"role": "system", "content": "Be brief."}, greeting, *after]}
    planned = MESSAGES.plan(body, MESSAGES.profile(route))
    assert planned is not None
    result = planned.repair({}, Policy())
    assert [f.code for f in result.findings] == ["TM514", "TM515"]
    assert result.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "(earlier conversation omitted)"}]}, greeting, *after]
    assert result.body["system"] == [*SYSTEM, {"type": "text", "text": "Be brief."}]
    assert violations(result.body, profile=route, state=ServerState(), user_first=True) == []


def test_a_valid_history_without_system_messages_passes_the_fast_check_on_the_folding_profiles() -> None:
    unsigned = {"type": "thinking", "thinking": "Weather first."}
    body = {**CLAUDE_CODE, "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [unsigned, {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]},
    ]}
    for route in ("deepseek", "zai"):
        assert MESSAGES.plan(body, MESSAGES.profile(route)) is None
    # Folding a system message does not make the compatible profiles strip the unsigned thinking they keep.
    with_system = {**body, "messages": [*body["messages"], {"role": "system", "content": "Be brief."}]}
    sent = repaired(with_system, "deepseek")
    assert sent is not None and sent["messages"] == body["messages"]


def test_rules_after_the_fold_still_reach_the_messages_they_judged() -> None:
    """TM514 removes messages before the thinking rules run over the positions the check marked: those move with it."""
    signed = {"type": "thinking", "thinking": "Done.", "signature": "EqQBCkgIARAB"}
    body = {**CLAUDE_CODE, "messages": [
        {"role": "user", "content": "Fix it."},
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": [{"type": "text", "text": "Fixed."}, signed]},
        {"role": "user", "content": "Thanks."},
    ]}
    planned = MESSAGES.plan(body, MESSAGES.profile("deepseek"))
    assert planned is not None
    result = planned.repair({}, Policy())
    assert [(f.code, f.index) for f in result.findings] == [("TM514", 1), ("TM507", 2)]
    assert result.body["messages"][1] == {"role": "assistant", "content": [{"type": "text", "text": "Fixed."}]}


@pytest.mark.parametrize("server", ["anthropic", *sorted(ROUTE)])
def test_claude_code_s_beta_path_through_toolmend_reaches_each_server(server: str) -> None:
    app, rec = make_messages_upstream(seed=5, profile=server)  # type: ignore[arg-type]
    wire = Wire()
    with serve(app) as url, serve(create_app(Settings(upstream=url + "/v1", profile=ROUTE.get(server, server)))) as proxy:
        if server != "anthropic":
            with pytest.raises(anthropic.APIStatusError):
                wire.client(url, "sk-direct").beta.messages.create(**copy.deepcopy(CLAUDE_CODE), extra_query=BETA)
        wire.client(proxy, "sk-through").beta.messages.create(**copy.deepcopy(CLAUDE_CODE), extra_query=BETA)
    assert (wire.last.path, wire.last.query) == ("/v1/messages", "beta=true")
    assert rec.last.path == "/v1/messages"
    if server == "anthropic":  # taken as sent: the client's own bytes
        assert "x-toolmend-repairs" not in wire.last.headers and rec.last.body_bytes == wire.last.sent
    else:
        assert wire.last.headers["x-toolmend-repairs"] == "TM514=1"
        assert rec.last.json["system"] == FOLDED and [m["role"] for m in rec.last.json["messages"]] == ["user"]


def test_chat_vllm_folds_a_later_system_message_into_the_first_and_openai_keeps_it() -> None:
    body = {"model": "qwen3", "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test."},
        {"role": "system", "content": "Answer in French."},
    ]}
    assert provider_violations(body, "vllm")
    assert plan(body, "openai") is None
    result = repair(body, profile="vllm")
    assert [(f.code, f.index) for f in result.findings] == [("TM311", 2)]
    assert result.body["messages"] == [{"role": "system", "content": "You are a coding agent.\n\nAnswer in French."},
                                       {"role": "user", "content": "Fix the failing test."}]
    assert provider_violations(result.body, "vllm") == []
    assert body["messages"][2] == {"role": "system", "content": "Answer in French."}  # the client's body is left as it was


def test_chat_vllm_puts_a_later_system_message_first_when_there_is_none() -> None:
    body = {"model": "qwen3", "messages": [{"role": "user", "content": "Fix it."}, {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                                           {"role": "system", "content": "In French."}]}
    result = repair(body, profile="vllm")
    assert [(f.code, f.index, f.action) for f in result.findings] == [("TM311", 1, "moved"), ("TM311", 2, "folded")]
    assert result.body["messages"] == [{"role": "system", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "In French."}]},
                                       {"role": "user", "content": "Fix it."}]
    assert provider_violations(result.body, "vllm") == []


ODD = ([1], {"a": 1}, 1, None, True, "", [None, "x"])


@pytest.mark.parametrize("odd", ODD, ids=repr)
def test_odd_system_messages_and_system_fields_are_repaired_without_raising(odd: Any) -> None:
    for position in (0, 1, 2):
        messages: list[Any] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
        messages.insert(position, {"role": "system", "content": odd, "output_config": odd})
        for route in ("deepseek", "zai"):
            sent = repaired({"model": "m", "max_tokens": 8, "system": odd, "messages": messages}, route)
            assert sent is not None and not any(m.get("role") == "system" for m in sent["messages"])
        chat = repair({"model": "m", "messages": messages}, profile="vllm")
        assert all(m.get("role") != "system" for m in chat.body["messages"][1:])
