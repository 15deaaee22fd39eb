"""Every provider profile through the running proxy, against a strict upstream playing that provider.

For each profile: a history the provider rejects before repair is accepted after it; a history already
valid for the provider arrives byte-identical; and a forgetful agent loop (assistant ``tool_calls``
dropped, streaming and not) works, with what only memory knows (Gemini's signatures, DeepSeek's
reasoning) restored. Then a history produced against OpenAI continues against Mistral and DeepSeek.
"""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import orjson
import pytest

from proxy.app import create_app
from proxy.config import Settings
from tests.support.client_tls import TLS
from tests.support.strict_upstream import Recorder, make_strict_upstream, serve

PROVIDERS = ("openai", "mistral", "deepseek", "anthropic", "gemini", "ollama", "xai", "groq", "vllm")
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}]
MODEL = "deepseek-reasoner"  # thinking mode for DeepSeek (DS-3); a plain name for everyone else


class Rig:
    def __init__(self, upstream_url: str, proxy_url: str, recorder: Recorder) -> None:
        self.upstream_url, self.proxy_url, self.recorder = upstream_url, proxy_url, recorder

    def post(self, base: str, body: dict) -> httpx.Response:
        return httpx.post(base + "/v1/chat/completions", content=orjson.dumps(body), timeout=10, verify=TLS,
                          headers={"content-type": "application/json", "authorization": "Bearer sk-profile-test"})

    def direct(self, body: dict) -> httpx.Response:
        return self.post(self.upstream_url, body)

    def through(self, body: dict) -> httpx.Response:
        return self.post(self.proxy_url, body)


@pytest.fixture(scope="module")
def rigs() -> Iterator[dict[str, Rig]]:
    started, stack = {}, []
    try:
        for provider in PROVIDERS:
            app, recorder = make_strict_upstream(provider=provider, seed=3)
            upstream = serve(app)
            upstream_url = upstream.__enter__()
            stack.append(upstream)
            proxy = serve(create_app(Settings(upstream=upstream_url + "/v1", profile=provider)))
            proxy_url = proxy.__enter__()
            stack.append(proxy)
            started[provider] = Rig(upstream_url, proxy_url, recorder)
        yield started
    finally:  # each server stops on a tick of its own loop: the 18 of them at once, not one after the other
        with ThreadPoolExecutor(max(1, len(stack))) as pool:
            list(pool.map(lambda server: server.__exit__(None, None, None), stack))


def call(cid: str, arguments: str = "{}") -> dict:
    return {"id": cid, "type": "function", "function": {"name": "weather", "arguments": arguments}}


def body(*messages: dict) -> dict:
    return {"model": MODEL, "messages": list(messages), "tools": TOOLS}


USER = {"role": "user", "content": "Weather?"}
LONG = "call_AbCdEfGhIjKlMnOpQrStUvWx"

# A history each provider rejects as sent, for the reason its profile exists.
BROKEN = {
    "openai": body(USER, {"role": "tool", "tool_call_id": LONG, "content": "18C"}),  # orphan (S2)
    "mistral": body(USER, {"role": "assistant", "content": None, "tool_calls": [call(LONG)]},
                    {"role": "tool", "tool_call_id": LONG, "content": "18C"}, {"role": "user", "content": "Thanks"}),
    "deepseek": body(USER, {"role": "assistant", "content": "", "tool_calls": [call(LONG)]},
                     {"role": "tool", "tool_call_id": LONG, "content": "18C"}),
    "anthropic": body(USER, {"role": "assistant", "content": "", "tool_calls": [call(LONG)]},
                      {"role": "tool", "tool_call_id": LONG, "content": "18C"}),
    "gemini": body({"role": "tool", "tool_call_id": LONG, "content": "18C"}),  # leading orphan: GE-3, GE-6
    "ollama": body(USER, {"role": "assistant", "content": None, "tool_calls": [call(LONG)]},
                   {"role": "tool", "tool_call_id": LONG, "content": "18C"}),
    "xai": body(USER, {"role": "assistant", "tool_calls": [call(LONG)]}, {"role": "tool", "tool_call_id": LONG, "content": "18C"}),
    "groq": body(USER, {"role": "assistant", "content": None, "reasoning_content": "think",
                        "tool_calls": [{**call(LONG), "index": 0}]}, {"role": "tool", "tool_call_id": LONG, "content": "18C"}),
    "vllm": body(USER, {"role": "assistant", "tool_calls": [call(LONG, "[1, 2]")]}, {"role": "tool", "tool_call_id": LONG, "content": "18C"}),
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rejected_before_repair_accepted_after(rigs: dict[str, Rig], provider: str) -> None:
    rig = rigs[provider]
    assert rig.direct(BROKEN[provider]).status_code in (400, 422)
    answer = rig.through(BROKEN[provider])
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-toolmend-repairs"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_loop_with_dropped_tool_calls_works_and_valid_histories_pass_unchanged(rigs: dict[str, Rig], provider: str) -> None:
    rig = rigs[provider]
    forgetful, faithful = [USER], [USER]
    for turn in range(2):
        first = rig.through(body(*faithful))
        assert first.status_code == 200, first.text
        emitted = first.json()["choices"][0]["message"]
        results = [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in emitted["tool_calls"]]
        # Replayed as sent, the provider's own answer is a valid history for it: it must arrive untouched.
        faithful += [{"role": "assistant", **{k: v for k, v in emitted.items() if k != "role"}}, *results]
        answer = rig.through(body(*faithful))
        assert answer.status_code == 200 and "x-toolmend-repairs" not in answer.headers, answer.text
        assert rig.recorder.last.body_bytes == orjson.dumps(body(*faithful))
        # The forgetful framework keeps only the results: the proxy restores the calls from memory.
        forgetful += results
        answer = rig.through(body(*forgetful))
        assert answer.status_code == 200, answer.text
        sent = [m for m in rig.recorder.last.json["messages"] if m.get("tool_calls")]
        assert sent[-1]["tool_calls"] == emitted["tool_calls"]  # ids, arguments, extra_content: exact
        if provider == "deepseek":
            assert sent[-1]["reasoning_content"] == emitted["reasoning_content"]
        text = answer.json()["choices"][0]["message"]["content"]
        for history in (forgetful, faithful):
            history += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Again {turn}"}]


@pytest.mark.parametrize("provider", ["gemini", "deepseek"])
def test_memory_restores_what_a_framework_strips_from_kept_calls(rigs: dict[str, Rig], provider: str) -> None:
    rig = rigs[provider]
    client = openai.OpenAI(base_url=rig.proxy_url + "/v1", api_key="sk-stripper")
    with client.chat.completions.create(model=MODEL, messages=[USER], tools=TOOLS, stream=True) as stream:
        calls: dict[int, dict] = {}
        for chunk in stream:
            for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = calls.setdefault(delta.index, {"id": delta.id, "type": "function", "function": {"name": delta.function.name, "arguments": ""}})
                entry["function"]["arguments"] += delta.function.arguments or ""
    kept = [calls[i] for i in sorted(calls)]  # what a framework keeps: no extra_content, no reasoning
    history = [USER, {"role": "assistant", "content": "", "tool_calls": kept},
               *[{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in kept]]
    answer = client.chat.completions.with_raw_response.create(model=MODEL, messages=history, tools=TOOLS)
    assert answer.http_response.status_code == 200
    # Gemini: each of the two parallel calls gets its signature back; DeepSeek: the turn gets its reasoning.
    assert answer.headers["x-toolmend-repairs"] == ("TM307=2" if provider == "gemini" else "TM304=1")


def test_an_openai_history_continues_against_mistral_and_deepseek(rigs: dict[str, Rig]) -> None:
    openai_rig = rigs["openai"]
    history = [USER]
    answer = openai_rig.through(body(*history)).json()["choices"][0]["message"]
    history += [{"role": "assistant", "content": None, "tool_calls": answer["tool_calls"]},
                *[{"role": "tool", "tool_call_id": c["id"], "content": "18C"} for c in answer["tool_calls"]]]
    final = openai_rig.through(body(*history)).json()["choices"][0]["message"]["content"]
    history += [{"role": "assistant", "content": final}, {"role": "user", "content": "And tomorrow?"}]
    for provider in ("mistral", "deepseek"):
        rig = rigs[provider]
        assert rig.direct(body(*history)).status_code in (400, 422)  # OpenAI ids / no reasoning: rejected as is
        continued = rig.through(body(*history))
        assert continued.status_code == 200, (provider, continued.text)
