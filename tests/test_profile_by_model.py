"""``--profile auto`` in front of an upstream whose host names no profile (a gateway, a local server): each request's
model picks the profile, for every dialect alike (``proxy/repair/profiles.py`` owns the names, ``model_profile``).
A bare ``deepseek-v4-pro`` gets DeepSeek's rules on Chat Completions (reasoning_content, TM304), the Responses API
(each output right after its call, RS-17) and Messages (unsigned thinking kept, system messages folded, TM514); a name
the profiles do not claim, or one with an ``org/`` prefix, keeps the route's profile (``openai``); a host that names a
profile, or a configured one, wins over the model."""

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx

from proxy.repair import profiles, route_profile
from proxy.repair.profiles import MODELS_REMEMBERED, PROFILES, model_profile
from tests.support.proxy_fixtures import AUTH, UPSTREAM, make_settings, running_proxy

CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
CHAT = {"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "18C"}]}
#: An output with a message between it and its call: OpenAI takes it, DeepSeek's /v1/responses refuses it (RS-17).
RESPONSES = {"input": [{"role": "user", "content": "Weather?"},
                       {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"},
                       {"role": "user", "content": "Hurry."},
                       {"type": "function_call_output", "call_id": "call_1", "output": "18C"}]}
#: Claude Code's mid-conversation system message: Anthropic takes it, DeepSeek's /anthropic refuses it (OT-1).
MESSAGES = {"max_tokens": 64, "messages": [{"role": "user", "content": "Fix the test."}, {"role": "system", "content": "Be brief."}]}
CASES = {"/chat/completions": (CHAT, "TM304"), "/responses": (RESPONSES, "TM103"), "/messages": (MESSAGES, "TM514")}


async def post(path: str, model: str, profile: str = "auto", upstream: str = UPSTREAM) -> tuple[httpx.Response, Any]:
    body, _ = CASES[path]
    with respx.mock(base_url=upstream, assert_all_called=True) as mock:
        route = mock.post(path).mock(return_value=httpx.Response(200, json={}))
        async with running_proxy(make_settings(profile=profile, upstream=upstream)) as proxy:
            answer = await proxy.client.post(f"/v1{path}", content=orjson.dumps({"model": model, **body}), headers=AUTH)
    return answer, route.calls.last.request


@pytest.mark.parametrize("path", sorted(CASES))
@pytest.mark.parametrize("model", ["deepseek-v4-pro", "DeepSeek-V4-Flash", "deepseek-v4-pro[1m]", "kimi-k2.6"])
async def test_a_deepseek_model_gets_deepseek_s_rules_in_every_dialect(path: str, model: str) -> None:
    answer, sent = await post(path, model)
    assert answer.headers.get("x-toolmend-repairs", "").startswith(CASES[path][1]), answer.headers
    assert sent.content != orjson.dumps({"model": model, **CASES[path][0]})


@pytest.mark.parametrize("path", sorted(CASES))
@pytest.mark.parametrize("model", ["gpt-5", "deepseek/deepseek-v4-pro", "my-finetune"])
async def test_other_models_keep_the_route_s_profile_and_their_bytes(path: str, model: str) -> None:
    answer, sent = await post(path, model)
    assert "x-toolmend-repairs" not in answer.headers
    assert sent.content == orjson.dumps({"model": model, **CASES[path][0]})


async def test_a_claude_model_on_messages_gets_anthropic_s_rules_which_take_its_system_message() -> None:
    answer, sent = await post("/messages", "claude-opus-4-8")
    assert "x-toolmend-repairs" not in answer.headers
    assert sent.content == orjson.dumps({"model": "claude-opus-4-8", **MESSAGES})


@pytest.mark.parametrize("path", sorted(CASES))
async def test_a_host_that_names_a_profile_or_a_configured_profile_wins_over_the_model(path: str) -> None:
    for profile, upstream in (("auto", "https://api.openai.com/v1"), ("openai", UPSTREAM)):
        answer, _ = await post(path, "deepseek-v4-pro", profile, upstream)
        assert "x-toolmend-repairs" not in answer.headers, (profile, upstream)


def test_one_mapping_of_model_names_to_profiles() -> None:
    names = {"deepseek-chat": "deepseek", "deepseek-reasoner": "deepseek", "kimi-k2-thinking": "deepseek", "moonshot-v1-8k": "deepseek",
             "claude-sonnet-5": "anthropic", "gemini-3-pro": "gemini", "mistral-large-latest": "mistral", "devstral-medium": "mistral",
             "magistral-medium": "mistral", "codestral-latest": "mistral", "grok-4": "xai", "glm-5.1": "zai", "GLM-4.6": "zai"}
    assert {name: getattr(model_profile(name), "name", None) for name in names} == names
    assert [model_profile(name) for name in ("gpt-5", "o3", "qwen3-coder", "meta-llama/Llama-3-8B", None, 7, ["deepseek-chat"])] == [None] * 7
    assert route_profile("http://upstream.test/v1", "auto") == (route_profile("https://api.openai.com/v1", "auto")[0], True)
    assert route_profile("https://api.openai.com/v1", "auto")[1] is False and route_profile("http://x.test/v1", "vllm")[1] is False


def test_the_protocols_doc_lists_every_model_pattern_under_its_profile() -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "protocols.md").read_text()
    rows = {line.rsplit("|", 2)[1].strip(" `"): line for line in readme.splitlines() if line.startswith("| `") and line.count("|") == 3}
    listed = {name: list(profile.models) for name, profile in PROFILES.items() if profile.models}
    assert {name: [cell.strip(" `") for cell in rows[name].split("|")[1].split(",")] for name in listed} == listed


def test_the_answers_kept_for_model_names_stay_bounded_and_right() -> None:
    """Clients choose the model names: however many they send, at most MODELS_REMEMBERED answers are kept."""
    for n in range(MODELS_REMEMBERED + 10):
        assert model_profile(f"deepseek-{n}") is PROFILES["deepseek"]
        assert model_profile(f"unknown-{n}") is None
    assert len(profiles._MODELS_SEEN) <= MODELS_REMEMBERED
    assert model_profile("deepseek-0") is PROFILES["deepseek"] and model_profile("DeepSeek-V4-Pro") is PROFILES["deepseek"]
