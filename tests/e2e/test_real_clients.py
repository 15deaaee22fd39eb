"""Request bodies of the real agent CLIs go upstream as the client's exact bytes under every profile whose provider
takes them, and what really is invalid in the same shapes is still repaired.

The bodies in ``tests/fixtures/clis/`` were recorded from Claude Code 2.1.332 (adaptive thinking on its default
model, manual thinking on an older one), Codex 0.171.0 and Qwen Code 0.24.0 by ``tests/support/cli_capture.py``
(its docstring says how to record them again): each is the third request of a session that called a tool twice,
so it carries the tool history as that CLI sends it: thinking with empty text and a signature
(``thinking.display: "omitted"``), ``store: false`` items with their ``msg_``/``fco_``/``rs_``/``fc_`` ids and the
reasoning's ``encrypted_content``, tool results as arrays of text parts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx

from tests.support.provider_validators import PROVIDERS, provider_first, provider_violations
from tests.support.proxy_fixtures import AUTH, UPSTREAM, make_settings, running_proxy
from tests.support.responses_validator import ServerState
from tests.support.responses_validator import violations as responses_violations

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "clis"
MESSAGES = ("/v1/messages?beta=true", "/messages")  # Claude Code's path, and the upstream's
RESPONSES = ("/v1/responses", "/responses")
CHAT = ("/v1/chat/completions", "/chat/completions")
ANSWERS = {
    "/messages": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "text", "text": "done"}],
                  "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}},
    "/responses": {"id": "resp_1", "object": "response", "status": "completed", "output": []},
    "/chat/completions": {"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]},
}


def recorded(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


QWEN = orjson.loads(recorded("qwen-code"))
CODEX = orjson.loads(recorded("codex"))
#: The chat profiles whose provider (as the validators model it) takes Qwen Code's body as sent, and those that refuse
#: its tool content arrays.
CHAT_TAKING = [name for name in PROVIDERS if provider_first(QWEN, name) is None]
CHAT_REFUSING_ARRAYS = [name for name in PROVIDERS if any(v.rule in ("S9", "GR-2", "MI-9") for v in provider_violations(QWEN, name))]
#: Anthropic only: it alone verifies the signatures, and the compatible endpoints refuse Claude Code's system message (OT-1).
MESSAGES_TAKING = ["anthropic"]
RESPONSES_TAKING = [name for name in ("openai", "deepseek") if not responses_violations(CODEX, ServerState(), name)]


async def sent_upstream(body: bytes, paths: tuple[str, str], profile: str) -> tuple[httpx.Response, httpx.Request]:
    """Post ``body`` to toolmend under ``profile``: its answer, and what reached the upstream."""
    client_path, upstream_path = paths
    with respx.mock(base_url=UPSTREAM) as upstream:
        route = upstream.post(upstream_path).mock(return_value=httpx.Response(200, json=ANSWERS[upstream_path]))
        async with running_proxy(make_settings(profile=profile)) as proxy:
            response = await proxy.client.post(client_path, content=body, headers={**AUTH, "content-type": "application/json"})
    assert response.status_code == 200
    return response, route.calls.last.request


def test_the_recorded_bodies_carry_the_shapes_they_were_recorded_for() -> None:
    for name in ("claude-code-adaptive", "claude-code-enabled"):
        body = orjson.loads(recorded(name))
        thinking = [block for message in body["messages"] if message["role"] == "assistant" for block in message["content"]
                    if block["type"] == "thinking"]
        assert len(thinking) == 2 and all(block["thinking"] == "" and block["signature"] for block in thinking)
        assert body["thinking"]["display"] == "omitted"
    assert orjson.loads(recorded("claude-code-enabled"))["thinking"]["type"] == "enabled"
    assert CODEX["store"] is False
    assert {item["id"][:item["id"].index("_")] for item in CODEX["input"] if "id" in item} == {"msg", "rs", "fc", "fco"}
    assert all(item["encrypted_content"] for item in CODEX["input"] if item.get("type") == "reasoning")
    tool_contents = [message["content"] for message in QWEN["messages"] if message["role"] == "tool"]
    assert len(tool_contents) == 2 and all(type(content) is list for content in tool_contents)
    assert "openai" in CHAT_TAKING and "openai" in RESPONSES_TAKING
    assert set(CHAT_REFUSING_ARRAYS) == {"groq", "mistral", "vllm"}


CASES = [
    *((name, MESSAGES, profile) for name in ("claude-code-adaptive", "claude-code-enabled") for profile in MESSAGES_TAKING),
    *(("codex", RESPONSES, profile) for profile in RESPONSES_TAKING),
    *(("qwen-code", CHAT, profile) for profile in CHAT_TAKING),
]


@pytest.mark.parametrize(("name", "paths", "profile"), CASES, ids=lambda value: value if type(value) is str else "")
async def test_a_real_client_body_goes_upstream_as_its_own_bytes(name: str, paths: tuple[str, str], profile: str) -> None:
    body = recorded(name)
    response, sent = await sent_upstream(body, paths, profile)
    assert "x-toolmend-repairs" not in response.headers
    assert sent.content == body


# --- what really is invalid in the same shapes ---------------------------------------------------------------------


def _unsign_first_thinking(body: dict[str, Any]) -> None:
    """The first assistant message's thinking keeps its empty text and loses its signature: AM-16."""
    first = next(message for message in body["messages"] if message["role"] == "assistant")
    del first["content"][0]["signature"]


@pytest.mark.parametrize("name", ["claude-code-adaptive", "claude-code-enabled"])
async def test_thinking_with_neither_text_nor_signature_is_still_removed(name: str) -> None:
    body = orjson.loads(recorded(name))
    _unsign_first_thinking(body)
    response, sent = await sent_upstream(orjson.dumps(body), MESSAGES, "anthropic")
    assert response.headers["x-toolmend-repairs"] == "TM505=1"
    assistants = [message["content"] for message in orjson.loads(sent.content)["messages"] if message["role"] == "assistant"]
    assert [block["type"] for block in assistants[0]] == ["tool_use"]
    assert assistants[1][0] == {"type": "thinking", "thinking": "", "signature": assistants[1][0]["signature"]}  # the signed one stays


def _reference(items: list[Any]) -> None:
    items.insert(3, {"type": "item_reference", "id": "msg_looked_up"})


def _reasoning_without_content(items: list[Any]) -> None:
    reasoning = next(item for item in items if item.get("type") == "reasoning")
    del reasoning["encrypted_content"]


@pytest.mark.parametrize("looked_up", [_reference, _reasoning_without_content], ids=["item_reference", "reasoning-without-encrypted-content"])
async def test_under_store_false_what_the_server_must_look_up_is_still_dropped(looked_up: Callable[[list[Any]], None]) -> None:
    body = orjson.loads(recorded("codex"))
    looked_up(body["input"])
    response, sent = await sent_upstream(orjson.dumps(body), RESPONSES, "openai")
    assert response.headers["x-toolmend-repairs"] == "TM407=1"
    kept = [item for item in body["input"] if item.get("type") != "item_reference" and (item.get("type") != "reasoning" or "encrypted_content" in item)]
    assert orjson.loads(sent.content)["input"] == kept  # every other item as sent, its id included


@pytest.mark.parametrize("profile", CHAT_REFUSING_ARRAYS)
async def test_tool_content_arrays_are_joined_for_the_providers_that_refuse_them(profile: str) -> None:
    response, sent = await sent_upstream(recorded("qwen-code"), CHAT, profile)
    assert "TM205=2" in response.headers["x-toolmend-repairs"].split(",")
    forwarded = orjson.loads(sent.content)
    joined = ["\n".join(part["text"] for part in message["content"]) for message in QWEN["messages"] if message["role"] == "tool"]
    assert [message["content"] for message in forwarded["messages"] if message["role"] == "tool"] == joined
    assert provider_first(forwarded, profile) is None
