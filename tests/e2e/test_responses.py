"""End to end on the Responses API: the ``openai`` client and the OpenAI Agents SDK -> toolmend under uvicorn -> the
strict scripted reasoning-model upstream (``tests/support/responses_upstream.py``), all on loopback.

* A forgetful agent loop (it keeps only the outputs of its calls) works through toolmend, whether the client
  asks for JSON, streams with ``create(stream=True)`` or uses ``responses.stream``, stored or ``store: false``:
  every request is accepted, and the upstream gets back exactly the reasoning and call items it emitted.
* A loop that keeps everything reaches the upstream as the client's bytes.
* A streamed answer of reasoning, a preamble message and three parallel calls, kept as the message's text and the
  outputs: the calls come back with their ids and the reasoning they were made with.
* An interrupted parallel turn, and a ``previous_response_id`` continuation that answers half a parallel turn,
  get a placeholder output of the unanswered call's family.
* The other ``/v1/responses/...`` routes pass through untouched; refusals are OpenAI errors naming ``input[N]``.
* Reasoning whose encrypted content the upstream cannot verify (RS-11: minted for another key) is left out and the
  request sent once more (TM408, with TM405 for the ids of what that reasoning produced); a Codex session resumed
  under another key pays that one refused round trip, not one per request. An item id the upstream never made
  (RS-8, 404) is sent once more without it (TM409).
* The Agents SDK's runs complete: multi-turn with function tools (a session store that forgets calls), handoffs
  whose input filters remove tool items, and a tool approval that was never given.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx
import openai
import orjson
import pytest
from openai.types.responses import EasyInputMessageParam, Response

from proxy.app import create_app
from proxy.config import Settings
from proxy.repair import DEFAULT_PLACEHOLDER
from tests.support.client_tls import TLS
from tests.support.lazy import lazy
from tests.support.responses_agent import (
    MODES,
    Mode,
    Wire,
    arrived_as_emitted,
    ask,
    forgetful_session,
    keep_only_outputs,
    outputs_for,
    run_config,
    without_reasoning,
)
from tests.support.responses_upstream import PREAMBLE_HEADER, ResponsesRecorder, make_responses_upstream
from tests.support.served import proxy_fixture, served_fixtures
from tests.support.strict_upstream import PARALLEL_HEADER, serve

if TYPE_CHECKING:
    from agents import Agent, RunConfig

agents = lazy("agents")

MODEL = "gpt-5.5"
TOOLS: list[Any] = [
    {"type": "function", "name": "weather", "description": "Weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch"},
]
TURNS = 3
ENCRYPTED = ["reasoning.encrypted_content"]
PREAMBLE = "Let me look these up."
#: How a client keeps its reasoning: by the stored item's id, or self-contained (asked for, or store: false).
VARIANTS: dict[str, dict[str, Any]] = {
    "stored-reasoning-by-id": {},
    "stored-encrypted-reasoning": {"include": ENCRYPTED},
    "store-false": {"store": False, "include": ENCRYPTED},
}


upstream, rec = served_fixtures(lambda: make_responses_upstream(seed=11))
proxy = proxy_fixture()
rejecting_proxy = proxy_fixture("rejecting_proxy", orphan_policy="reject")


@pytest.fixture
def wire() -> Iterator[Wire]:
    recording = Wire()
    yield recording
    recording.close()


@pytest.fixture
async def async_wire() -> AsyncIterator[Wire]:
    recording = Wire()
    yield recording
    await recording.aclose()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def kept(response: Response, *, ids: bool = True) -> list[dict[str, Any]]:
    """Every output item of a response as a client that keeps everything stores it (Codex drops ids under store: false)."""
    items = [item.model_dump(mode="json", exclude_none=True) for item in response.output]
    return items if ids else [{key: value for key, value in item.items() if key != "id"} for item in items]


def refused_directly(upstream_url: str, rec: ResponsesRecorder, message: str, **request: Any) -> int:
    """The premise of a repair test: sent straight to the upstream, the request is refused with ``message``.
    Answers how many refusals the upstream has recorded, so a test can tell that none came after."""
    with openai.OpenAI(base_url=upstream_url + "/v1", api_key="sk-direct", max_retries=0,
                       http_client=openai.DefaultHttpxClient(verify=TLS)) as direct, \
            pytest.raises(openai.BadRequestError) as refused:
        direct.responses.create(**request)
    assert isinstance(refused.value.body, dict) and refused.value.body["message"] == message
    return len(rec.rejections)


def assert_untouched(wire: Wire, rec: ResponsesRecorder) -> None:
    """Every request went upstream as the client's own bytes, and no answer says toolmend repaired anything."""
    posts = [received for received in rec.requests if received.path == "/v1/responses"]
    assert [exchange.sent for exchange in wire.exchanges] == [received.body_bytes for received in posts]
    assert all("x-toolmend-repairs" not in exchange.headers for exchange in wire.exchanges)


# --------------------------------------------------------------------------------------------------
# the openai client
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", MODES)
def test_a_loop_that_drops_its_calls_gets_back_exactly_what_the_upstream_emitted(proxy: str, rec: ResponsesRecorder, wire: Wire,
                                                                                 mode: Mode, variant: str) -> None:
    fields = VARIANTS[variant]
    client = wire.client(proxy + "/v1", f"sk-forgetful-{mode}-{variant}")
    history: list[dict[str, Any]] = []
    for turn in range(TURNS):
        history.append(user(f"Question {turn}"))
        answer = ask(client, mode, model=MODEL, input=history, tools=TOOLS, **fields)
        assert [item.type for item in answer.output] == ["reasoning", "function_call", "custom_tool_call"]
        assert ("encrypted_content" in kept(answer)[0]) == ("include" in fields)
        history += outputs_for(answer)  # the reasoning and both calls are dropped, every turn
        final = ask(client, mode, model=MODEL, input=history, tools=TOOLS, **fields)
        assert final.output_text == "Received 2 tool outputs."
        # Every earlier turn's outputs are orphans again: one re-insertion of a whole parallel turn per turn so far, with
        # the ids the upstream gave its items (taken under store: false too: each item carries its content).
        assert wire.last.headers["x-toolmend-repairs"] == f"TM101={turn + 1}"
        assert wire.last.headers["x-toolmend-calls"] == f"recalled={2 * (turn + 1)},synthesized=0"
        arrived_as_emitted(rec.last, rec.emitted_turns)
        history.append({"role": "assistant", "content": final.output_text})
    assert rec.rejections == []
    assert len(rec.requests) == 2 * TURNS
    assert "x-toolmend-repairs" not in wire.exchanges[0].headers and rec.requests[0].body_bytes == wire.exchanges[0].sent


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "store-false"])
@pytest.mark.parametrize("mode", MODES)
def test_a_loop_that_keeps_everything_arrives_byte_identical(proxy: str, rec: ResponsesRecorder, wire: Wire, mode: Mode,
                                                            stored: bool) -> None:
    fields: dict[str, Any] = {} if stored else {"store": False}
    client = wire.client(proxy + "/v1", f"sk-faithful-{mode}-{stored}")
    history: list[dict[str, Any]] = []
    for turn in range(2):
        history.append(user(f"Question {turn}"))
        answer = ask(client, mode, model=MODEL, input=history, tools=TOOLS, **fields)
        history += [*kept(answer, ids=stored), *outputs_for(answer)]
        final = ask(client, mode, model=MODEL, input=history, tools=TOOLS, **fields)
        assert final.output_text == "Received 2 tool outputs."
        history += kept(final, ids=stored)
    assert rec.rejections == [] and len(wire.exchanges) == 4
    assert_untouched(wire, rec)


@pytest.mark.parametrize("include", [[], ["reasoning.encrypted_content"]], ids=["reasoning-by-id", "encrypted-reasoning"])
@pytest.mark.parametrize("mode", [mode for mode in MODES if mode != "create"])
def test_a_streamed_preamble_and_parallel_calls_kept_as_text_and_outputs(proxy: str, rec: ResponsesRecorder, wire: Wire, mode: Mode,
                                                                         include: list[str]) -> None:
    """A reasoning model streams reasoning, an assistant message and three parallel calls (two function calls, one
    custom tool call); the client keeps the message's text and the outputs. The calls come back with their ``fc_``
    ids and the reasoning they were made with, as the stream carried it."""
    client = wire.client(proxy + "/v1", f"sk-preamble-{mode}-{len(include)}")
    history: list[dict[str, Any]] = [user("Weather in Paris and Tokyo, and patch the file")]
    answer = ask(client, mode, model=MODEL, input=history, tools=TOOLS, include=include,
                 extra_headers={PARALLEL_HEADER: "3", PREAMBLE_HEADER: PREAMBLE})
    emitted = rec.emitted_turns[-1]
    assert [item["type"] for item in emitted] == ["reasoning", "message", "function_call", "custom_tool_call", "function_call"]
    history += [{"role": "assistant", "content": answer.output_text}, *outputs_for(answer)]
    final = ask(client, mode, model=MODEL, input=history, tools=TOOLS, include=include)
    assert final.output_text == "Received 3 tool outputs." and rec.rejections == []
    assert wire.last.headers["x-toolmend-repairs"] == "TM101=1"
    sent = rec.last.json["input"]
    assert sent[2:6] == [emitted[0], *emitted[2:]]  # the reasoning, then the calls, each as the upstream made it
    assert all(orjson.dumps(item) in rec.last.body_bytes for item in sent[2:6])


def test_a_loop_that_keeps_everything_with_its_custom_tool_first(proxy: str, rec: ResponsesRecorder, wire: Wire) -> None:
    client = wire.client(proxy + "/v1", "sk-faithful-custom-first")
    history: list[dict[str, Any]] = [user("Patch, then check the weather")]
    answer = ask(client, "create", model=MODEL, input=history, tools=TOOLS[::-1])  # Codex order: apply_patch, then a function
    assert [item.type for item in answer.output] == ["reasoning", "custom_tool_call", "function_call"]
    history += [*kept(answer), *outputs_for(answer)]
    ask(client, "create", model=MODEL, input=history, tools=TOOLS[::-1])
    assert rec.rejections == []
    assert_untouched(wire, rec)


def test_a_valid_body_is_forwarded_as_its_own_bytes(proxy: str, rec: ResponsesRecorder) -> None:
    body = (
        b'{"model": "gpt-5.5",  "input": [\n {"role": "user", "content": "caf\\u00e9 \xe2\x98\x95"},'
        b' {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA\\/opaque"},'
        b' {"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{ \\"city\\" : \\"Paris\\" }"},'
        b' {"type": "function_call_output", "call_id": "call_a", "output": "18C"}], "store": false, "temperature": 1.0}'
    )
    answer = httpx.post(proxy + "/v1/responses", content=body, headers={"content-type": "application/json", "authorization": "Bearer sk-bytes"}, verify=TLS)
    assert answer.status_code == 200 and answer.json()["output"][-1]["content"][0]["text"] == "Received 1 tool output."
    assert "x-toolmend-repairs" not in answer.headers
    assert rec.last.body_bytes == body


@pytest.mark.parametrize(("lost", "placeholder_type"), [("function_call", "function_call_output"),
                                                         ("custom_tool_call", "custom_tool_call_output")])
def test_an_interrupted_parallel_turn_gets_a_placeholder_of_the_call_s_family(upstream: tuple[str, ResponsesRecorder], proxy: str,
                                                                             rec: ResponsesRecorder, wire: Wire, lost: str,
                                                                             placeholder_type: str) -> None:
    client = wire.client(proxy + "/v1", "sk-interrupted")
    answer = ask(client, "create", model=MODEL, input=[user("Patch and check the weather")], tools=TOOLS)
    outputs = outputs_for(answer)
    missing = next(item["call_id"] for item in kept(answer) if item["type"] == lost)
    history = [user("Patch and check the weather"), *kept(answer), *[o for o in outputs if o["call_id"] != missing]]
    refusals = refused_directly(upstream[0], rec, f"No tool output found for {lost.replace('_', ' ')} {missing}.",
                                model=MODEL, input=history, tools=TOOLS)
    final = ask(client, "create", model=MODEL, input=history, tools=TOOLS)
    assert final.output_text == "Received 2 tool outputs."
    assert wire.last.headers["x-toolmend-repairs"] == "TM104=1"
    assert "x-toolmend-calls" not in wire.last.headers  # nothing was put back, only an output added
    received = rec.last.json["input"]
    assert received[:-1] == history  # the client's items untouched, the placeholder after the outputs
    assert received[-1] == {"type": placeholder_type, "call_id": missing, "output": DEFAULT_PLACEHOLDER}
    assert len(rec.rejections) == refusals


@pytest.mark.parametrize("mode", MODES)
def test_previous_response_id_with_a_parallel_call_left_unanswered(upstream: tuple[str, ResponsesRecorder], proxy: str,
                                                                  rec: ResponsesRecorder, wire: Wire, mode: Mode) -> None:
    client = wire.client(proxy + "/v1", f"sk-chained-{mode}")
    first = ask(client, mode, model=MODEL, input=[user("Patch and check the weather")], tools=TOOLS)
    answered, unanswered = outputs_for(first)  # the weather call is answered, the patch is not
    refusals = refused_directly(upstream[0], rec, f"No tool output found for custom tool call {unanswered['call_id']}.",
                                model=MODEL, previous_response_id=first.id, input=[answered], tools=TOOLS)
    second = ask(client, mode, model=MODEL, previous_response_id=first.id, input=[answered], tools=TOOLS)
    assert second.output_text == "Received 2 tool outputs."
    assert wire.last.headers["x-toolmend-repairs"] == "TM402=1"
    placeholder = {"type": "custom_tool_call_output", "call_id": unanswered["call_id"], "output": DEFAULT_PLACEHOLDER}
    assert rec.last.json["input"] == [placeholder, answered]
    # The chain goes on from the repaired response as from any other: nothing more to repair.
    third = ask(client, mode, model=MODEL, previous_response_id=second.id, input=[user("Thanks")], tools=TOOLS)
    assert [item.type for item in third.output] == ["reasoning", "function_call", "custom_tool_call"]
    assert "x-toolmend-repairs" not in wire.last.headers and rec.last.body_bytes == wire.last.sent
    assert len(rec.rejections) == refusals


def test_previous_response_id_with_its_items_resent_drops_what_the_server_holds(proxy: str, rec: ResponsesRecorder, wire: Wire) -> None:
    client = wire.client(proxy + "/v1", "sk-chained-replay")
    first = ask(client, "create", model=MODEL, input=[user("Go")], tools=TOOLS)
    outputs = outputs_for(first)
    second = ask(client, "create", model=MODEL, previous_response_id=first.id, input=[*kept(first), *outputs], tools=TOOLS)
    assert second.output_text == "Received 2 tool outputs."
    assert wire.last.headers["x-toolmend-repairs"] == "TM401=3"  # reasoning and two calls: the server has them
    assert rec.last.json["input"] == outputs and rec.rejections == []


def test_the_other_responses_routes_pass_through_untouched(proxy: str, rec: ResponsesRecorder, wire: Wire) -> None:
    client = wire.client(proxy + "/v1", "sk-passthrough")
    created = ask(client, "create", model=MODEL, input=[user("Go")], tools=TOOLS)
    retrieved = client.responses.retrieve(created.id)
    assert retrieved.model_dump() == created.model_dump()
    assert rec.last.path == f"/v1/responses/{created.id}" and "x-toolmend-repairs" not in wire.last.headers
    # A body toolmend would repair on POST /v1/responses goes to another route exactly as sent.
    broken = b'{"model": "gpt-5.5", "input": [{"type": "function_call_output", "call_id": "call_x", "output": "y"}]}'
    for method, path, query in [("POST", "/v1/responses/compact", ""), ("POST", f"/v1/responses/{created.id}/cancel", ""),
                                ("GET", f"/v1/responses/{created.id}/input_items", "limit=2&order=asc"),
                                ("DELETE", f"/v1/responses/{created.id}", "")]:
        content = broken if method == "POST" else b""
        answer = httpx.request(method, f"{proxy}{path}?{query}".rstrip("?"), content=content,
                               headers={"authorization": "Bearer sk-passthrough"}, verify=TLS)
        assert answer.status_code == 200 and "x-toolmend-repairs" not in answer.headers
        assert answer.json() == {"object": "responses_upstream.passthrough", "method": method, "path": path, "query": query,
                                 "body_bytes": len(content)}
        assert (rec.last.path, rec.last.body_bytes) == (path, content)


def test_refusals_and_upstream_errors_are_openai_errors(upstream: tuple[str, ResponsesRecorder], proxy: str, rejecting_proxy: str,
                                                        rec: ResponsesRecorder, wire: Wire) -> None:
    refusing = wire.client(rejecting_proxy + "/v1", "sk-refused")
    answer = ask(refusing, "create", model=MODEL, input=[user("Go")], tools=TOOLS)
    # A remembered call is put back under any policy; only an output nobody knows the call of is refused.
    remembered = ask(refusing, "create", model=MODEL, input=[user("Go"), *outputs_for(answer)], tools=TOOLS)
    assert remembered.output_text == "Received 2 tool outputs." and wire.last.headers["x-toolmend-repairs"] == "TM101=1"
    sent_upstream = len(rec.requests)
    unknown = {"type": "function_call_output", "call_id": "call_NeverMadeByTheUpstream1", "output": "18C"}
    with pytest.raises(openai.BadRequestError) as refused:
        ask(refusing, "create", model=MODEL, input=[user("Go"), unknown], tools=TOOLS)
    error = refused.value
    assert (error.status_code, error.param, error.code, error.type) == (400, "input[1]", "toolmend_orphan_tool_message", "invalid_request_error")
    assert isinstance(error.body, dict) and set(error.body) == {"message", "type", "param", "code"}
    assert "call_NeverMadeByTheUpstream1" in error.message and "--orphan-policy" in error.message
    assert len(rec.requests) == sent_upstream  # never forwarded

    # What toolmend cannot know about (an id the upstream never made) goes as sent; the 404 naming it is answered by
    # sending it once more without that id (TM409, RS-8).
    client = wire.client(proxy + "/v1", "sk-errors")
    fabricated = {"type": "message", "role": "assistant", "id": "msg_" + "0" * 50, "content": [{"type": "output_text", "text": "hi"}]}
    rejections = len(rec.rejections)
    ask(client, "create", model=MODEL, input=[user("Go"), fabricated])
    assert rec.rejections[rejections:] == [{"error": {"message": f"Item with id '{fabricated['id']}' not found.", "type": "invalid_request_error",
                                                      "param": "input", "code": None}}]
    assert rec.requests[-2].body_bytes == wire.last.sent and wire.last.headers["x-toolmend-repairs"] == "TM409=1"
    assert rec.last.json["input"] == [user("Go"), {key: value for key, value in fabricated.items() if key != "id"}]
    # An error toolmend knows no fix for comes back as the upstream sent it.
    with pytest.raises(openai.BadRequestError) as unknown_previous:
        ask(client, "create", model=MODEL, input=[user("Go")], previous_response_id="resp_never_made")
    assert unknown_previous.value.body == rec.rejections[-1]["error"] and rec.last.body_bytes == wire.last.sent

    invalid = httpx.post(proxy + "/v1/responses", content=b'{"input": [', headers={"content-type": "application/json"}, verify=TLS)
    assert invalid.status_code == 400
    assert set(invalid.json()["error"]) == {"message", "type", "param", "code"} and invalid.json()["error"]["code"] == "invalid_json"


@pytest.mark.parametrize("variant", ["stored-encrypted-reasoning", "store-false"])
def test_reasoning_minted_for_another_key_is_left_out_once_and_the_call_succeeds(wire: Wire, variant: str) -> None:
    """RS-11: the strict upstream verifies encrypted content against the key it minted it for, and the client switched
    keys (a Codex login to another organization) in the middle of its tool loop. toolmend cannot tell; the upstream
    refuses once, toolmend sends the same request without the reasoning (and, stored, without the server ids of the
    calls it produced, TM405: they would be looked up without it), and each way the client asks gets its answer."""
    fields = VARIANTS[variant]
    stored = fields.get("store") is not False
    app, rec = make_responses_upstream(seed=41, verify_encrypted=True)
    with serve(app) as url, serve(create_app(Settings(upstream=url + "/v1"))) as proxy:
        for mode in MODES:
            before = wire.client(proxy + "/v1", f"sk-org-a-{mode}-{variant}")
            history = [user("Patch and check the weather")]
            answer = ask(before, mode, model=MODEL, input=history, tools=TOOLS, **fields)
            reasoning, *calls = kept(answer, ids=stored)
            history += [reasoning, *calls, *outputs_for(answer)]
            blob = reasoning["encrypted_content"]
            refusal = (f"The encrypted content for item {reasoning['id']} could not be verified. Reason: Encrypted content could "
                       "not be decrypted or parsed." if stored else f"The encrypted content {blob[:4]}...{blob[-4:]} could not be verified.")
            refusals = refused_directly(url, rec, refusal, model=MODEL, input=history, tools=TOOLS, **fields)
            after = wire.client(proxy + "/v1", f"sk-org-b-{mode}-{variant}")
            final = ask(after, mode, model=MODEL, input=history, tools=TOOLS, **fields)
            assert final.output_text == "Received 2 tool outputs."
            assert wire.last.headers["x-toolmend-repairs"] == ("TM408=1,TM405=2" if stored else "TM408=1")
            assert len(rec.rejections) == refusals + 1  # refused once through toolmend, then accepted
            first, retried = rec.requests[-2:]
            assert first.body_bytes == wire.last.sent  # the client's own bytes went first
            without_ids = [{key: value for key, value in call.items() if key != "id"} for call in calls]
            assert retried.json["input"] == [history[0], *without_ids, *outputs_for(answer)]
            assert {key: value for key, value in retried.json.items() if key != "input"} == {
                key: value for key, value in first.json.items() if key != "input"}


def test_a_codex_session_resumed_under_another_key_pays_one_refused_round_trip(wire: Wire) -> None:
    """A Codex session (``store: false``, every item kept without its id, reasoning carried as encrypted content)
    resumed under another key: the first key's reasoning cannot be verified (RS-11). The first request is refused once
    and sent again without it (TM408); toolmend remembers what was refused, and the next requests leave it out before
    they are sent (TM408 again, the upstream asked nothing), keeping the reasoning minted for the second key: three
    requests, four upstream calls."""
    fields = VARIANTS["store-false"]
    app, rec = make_responses_upstream(seed=43, verify_encrypted=True)
    with serve(app) as url, serve(create_app(Settings(upstream=url + "/v1"))) as proxy:
        before = wire.client(proxy + "/v1", "sk-org-a-codex")
        history = [user("Patch and check the weather")]
        answer = ask(before, "create", model=MODEL, input=history, tools=TOOLS, **fields)
        history += [*kept(answer, ids=False), *outputs_for(answer)]
        history += kept(ask(before, "create", model=MODEL, input=history, tools=TOOLS, **fields), ids=False)
        foreign = [item for item in history if item.get("type") == "reasoning"]
        after = wire.client(proxy + "/v1", "sk-org-b-codex")
        calls, refusals = len(rec.requests), len(rec.rejections)
        history.append(user("And in Lyon?"))
        answer = ask(after, "create", model=MODEL, input=history, tools=TOOLS, **fields)  # refused once, retried
        left_out = f"TM408={len(foreign)}"
        assert wire.last.headers["x-toolmend-repairs"] == left_out and len(rec.rejections) == refusals + 1
        history += [*kept(answer, ids=False), *outputs_for(answer)]
        final = ask(after, "create", model=MODEL, input=history, tools=TOOLS, **fields)  # the new reasoning kept
        assert final.output_text == "Received 2 tool outputs." and wire.last.headers["x-toolmend-repairs"] == left_out
        history += [*kept(final, ids=False), user("Thanks. And Nice?")]
        ask(after, "create", model=MODEL, input=history, tools=TOOLS, **fields)
        assert wire.last.headers["x-toolmend-repairs"] == left_out
        assert (len(rec.requests) - calls, len(rec.rejections) - refusals) == (4, 1)
        minted_here = [item for item in kept(answer, ids=False) if item["type"] == "reasoning"]
        sent_reasoning = [[item for item in received.json["input"] if item.get("type") == "reasoning"] for received in rec.requests[calls + 2:]]
        assert sent_reasoning[0] == minted_here and sent_reasoning[1][:1] == minted_here  # and the final answer's after it
        assert foreign and not any(item in foreign for reasoning in sent_reasoning for item in reasoning)


# --------------------------------------------------------------------------------------------------
# the OpenAI Agents SDK
# --------------------------------------------------------------------------------------------------


def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def local_time(city: str) -> str:
    """Local time in a city."""
    return f"12:00 in {city}"


def delete_file(path: str) -> str:
    """Delete a file (asks the user first)."""
    return f"deleted {path}"


@functools.cache
def tool(function: Callable[[str], str], needs_approval: bool = False) -> Any:
    """``function`` as the Agents SDK's function tool, made on first use: the SDK is imported then."""
    return agents.function_tool(function, needs_approval=needs_approval)


async def test_agents_sdk_multi_turn_run_with_function_tools_goes_through_untouched(proxy: str, rec: ResponsesRecorder, async_wire: Wire) -> None:
    config = run_config(async_wire.async_client(proxy + "/v1", "sk-agents-clean"))
    agent = agents.Agent(name="assistant", instructions="Be terse.", tools=[tool(weather), tool(local_time)], model=MODEL)
    first = await agents.Runner.run(agent, "Weather and time in Paris?", run_config=config)
    assert first.final_output == "Received 2 tool outputs."
    second = await agents.Runner.run(agent, [*first.to_input_list(), EasyInputMessageParam(role="user", content="And in Tokyo?")], run_config=config)
    assert second.final_output == "Received 2 tool outputs."
    assert rec.rejections == [] and len(rec.requests) == 4
    assert_untouched(async_wire, rec)
    arrived_as_emitted(rec.last, rec.emitted_turns, exact_bytes=False)  # the SDK replays every turn itself, in its own encoding


async def test_agents_sdk_session_that_forgets_calls_is_repaired_from_memory(proxy: str, rec: ResponsesRecorder, async_wire: Wire) -> None:
    config = run_config(async_wire.async_client(proxy + "/v1", "sk-agents-session"))
    agent = agents.Agent(name="assistant", instructions="Be terse.", tools=[tool(weather), tool(local_time)], model=MODEL)
    session = forgetful_session("forgets-calls", forgets={"function_call"})
    for question in ("Weather and time in Paris?", "And in Tokyo?", "And in Lima?"):
        result = await agents.Runner.run(agent, question, session=session, run_config=config)
        assert result.final_output == "Received 2 tool outputs."
    assert rec.rejections == [] and len(rec.requests) == 6
    # Each run's first request reads the session: the calls of every earlier run come back from memory, and the
    # reasoning the session kept (now before the outputs) is the second copy of what memory put back (TM403).
    firsts = async_wire.exchanges[2::2]
    assert [(e.headers["x-toolmend-repairs"], e.headers["x-toolmend-calls"]) for e in firsts] == [
        ("TM101=1,TM403=1", "recalled=2,synthesized=0"), ("TM101=2,TM403=2", "recalled=4,synthesized=0")]
    arrived_as_emitted(rec.requests[4], rec.emitted_turns[:2])
    arrived_as_emitted(rec.last, rec.emitted_turns[:2])  # still the remembered bytes on the run's next request
    arrived_as_emitted(rec.last, rec.emitted_turns[2:], exact_bytes=False)  # this run's own turn: the SDK's encoding


async def test_agents_sdk_session_that_forgets_calls_and_reasoning(proxy: str, rec: ResponsesRecorder, async_wire: Wire) -> None:
    config = run_config(async_wire.async_client(proxy + "/v1", "sk-agents-session-rs"))
    agent = agents.Agent(name="assistant", instructions="Be terse.", tools=[tool(weather), tool(local_time)], model=MODEL)
    session = forgetful_session("forgets-calls-and-reasoning", forgets={"function_call", "reasoning"})
    for question in ("Weather and time in Paris?", "And in Tokyo?"):
        result = await agents.Runner.run(agent, question, session=session, run_config=config)
        assert result.final_output == "Received 2 tool outputs."
    assert rec.rejections == []


def _handoff_rig(wire: Wire, proxy: str, key: str, input_filter: Any) -> tuple[Agent, RunConfig]:
    specialist = agents.Agent(name="specialist", instructions="Answer from what you were handed.", model=MODEL)
    triage = agents.Agent(name="triage", instructions="Check the weather, then hand off.", tools=[tool(weather)], model=MODEL,
                          handoffs=[agents.handoff(specialist, input_filter=input_filter)])
    return triage, run_config(wire.async_client(proxy + "/v1", key))


async def test_agents_sdk_handoff_with_remove_all_tools_needs_nothing(proxy: str, rec: ResponsesRecorder, async_wire: Wire) -> None:
    remove_all_tools = importlib.import_module("agents.extensions.handoff_filters").remove_all_tools
    triage, config = _handoff_rig(async_wire, proxy, "sk-handoff-sdk-filter", remove_all_tools)
    result = await agents.Runner.run(triage, "Weather in Paris, then the specialist", run_config=config)
    assert (result.last_agent.name, result.final_output) == ("specialist", "Hello from the responses upstream.")
    assert [item.get("type", "message") for item in rec.last.json["input"]] == ["message"]  # only the user's question
    assert rec.rejections == []
    assert_untouched(async_wire, rec)


def _filter_id(input_filter: Any) -> str:
    return str(input_filter.__name__)


@pytest.mark.parametrize("input_filter", [keep_only_outputs, without_reasoning], ids=_filter_id)
async def test_agents_sdk_handoff_whose_filter_removes_tool_items(proxy: str, rec: ResponsesRecorder, async_wire: Wire,
                                                                  input_filter: Any) -> None:
    triage, config = _handoff_rig(async_wire, proxy, f"sk-handoff-{input_filter.__name__}", input_filter)
    result = await agents.Runner.run(triage, "Weather in Paris, then the specialist", run_config=config)
    # The scripted model calls weather and transfer_to_specialist in parallel; the specialist sees both outputs.
    assert (result.last_agent.name, result.final_output) == ("specialist", "Received 2 tool outputs.")
    assert rec.rejections == [] and len(rec.requests) == 2
    [emitted] = rec.emitted_turns
    assert [item.get("name") for item in emitted[1:]] == ["weather", "transfer_to_specialist"]
    if input_filter is keep_only_outputs:  # the calls and their reasoning came back from memory, exactly
        assert (async_wire.last.headers["x-toolmend-repairs"], async_wire.last.headers["x-toolmend-calls"]) == ("TM101=1", "recalled=2,synthesized=0")
        arrived_as_emitted(rec.last, [emitted])
    else:  # the calls are the SDK's own, but their stored ids need the reasoning: the ids go (RS-4)
        assert async_wire.last.headers["x-toolmend-repairs"] == "TM405=2" and "x-toolmend-calls" not in async_wire.last.headers
        calls = [item for item in rec.last.json["input"] if item.get("type") == "function_call"]
        assert calls == [{key: value for key, value in item.items() if key != "id"} for item in emitted[1:]]


async def test_agents_sdk_abandoned_tool_approval_gets_a_placeholder(proxy: str, rec: ResponsesRecorder, async_wire: Wire) -> None:
    config = run_config(async_wire.async_client(proxy + "/v1", "sk-agents-approval"))
    agent = agents.Agent(name="janitor", instructions="Clean up.", tools=[tool(weather), tool(delete_file, needs_approval=True)], model=MODEL)
    paused = await agents.Runner.run(agent, "Delete old.log and check the weather", run_config=config)
    [pending] = paused.interruptions  # weather ran; delete_file waits for an approval that never comes
    abandoned = pending.call_id
    # The user moves on: a new run from the history as it stands, the pending call unanswered (RS-1).
    moved_on = await agents.Runner.run(agent, [*paused.to_input_list(), EasyInputMessageParam(role="user", content="Never mind, just the weather")], run_config=config)
    assert async_wire.last.headers["x-toolmend-repairs"] == "TM104=1"
    assert {"type": "function_call_output", "call_id": abandoned, "output": DEFAULT_PLACEHOLDER} in rec.last.json["input"]
    # This time the user approves, and the run completes.
    state = moved_on.to_state()
    for interruption in moved_on.interruptions:
        state.approve(interruption)
    done = await agents.Runner.run(agent, state, run_config=config)
    assert done.final_output == "Received 2 tool outputs."
    assert rec.rejections == [] and len(rec.requests) == 3


