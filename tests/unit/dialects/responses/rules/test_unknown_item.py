"""TM409: a Responses upstream does not know an item id the input names (RS-8, 404 ``Item with id '...' not found.``),
and toolmend sends the request once more without that item (when it holds nothing but the id) or without its id. The
rule's docstring example against the strict validator, and the request path with respx as the upstream: only that
refusal is retried, only once, and reported like every repair."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from proxy.dialects import RESPONSES
from proxy.dialects.refusal import Leaving, Refusal
from proxy.dialects.responses.plan import retried_unknown
from proxy.dialects.responses.rules import unknown_item
from proxy.repair import Policy
from proxy.repair.catalog import describe
from tests.support.proxy_fixtures import AUTH, running_proxy
from tests.support.responses_validator import ServerState, error_for, violations
from tests.support.retries import scripted, sent
from tests.unit.dialects.responses.test_capture import CALL, REASONING, response
from tests.unit.dialects.responses.test_rules import USER, body_of, output

PATH = "/v1/responses"
OPENAI = RESPONSES.profile("openai")
DOC = describe(unknown_item)
OTHER_PROJECT = {"type": "message", "id": "msg_other_project", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]}
REFERENCE = {"type": "item_reference", "id": "rs_expired"}
ACCEPTED = response([REASONING, CALL])


def not_found(item_id: str) -> httpx.Response:
    status, body = 404, {"error": {"message": f"Item with id '{item_id}' not found.", "type": "invalid_request_error", "param": "input", "code": None}}
    return httpx.Response(status, content=orjson.dumps(body), headers={"content-type": "application/json"})


def leaving(item_id: str) -> Leaving:
    return Leaving(refusal=Refusal(404, (f"Item with id '{item_id}' not found.",)))


def test_the_docstring_example_is_retried_as_its_good_history() -> None:
    body = body_of(DOC.bad)
    refused = error_for(body, ServerState())
    assert refused is not None and refused[0] == 404 and [found.rule for found in violations(body, ServerState())] == ["RS-8"]
    result = retried_unknown(body, OPENAI, Policy(), leaving(refused[1]["error"]["message"].split("'")[1]))
    assert result is not None and result.body["input"] == DOC.good and [finding.code for finding in result.findings] == ["TM409"]
    assert violations(result.body, ServerState()) == [] and body == body_of(DOC.bad)


@pytest.mark.parametrize(("item", "expected"), [
    (OTHER_PROJECT, {key: value for key, value in OTHER_PROJECT.items() if key != "id"}),  # its content stays
    (REFERENCE, None),  # nothing but the id: dropped
    ({"type": "reasoning", "id": "rs_expired", "summary": [], "encrypted_content": "gAAA-kept"},
     {"type": "reasoning", "summary": [], "encrypted_content": "gAAA-kept"}),
], ids=["message", "item-reference", "reasoning-with-content"])
def test_the_named_item_loses_its_id_or_goes_when_it_holds_nothing_else(item: dict[str, Any], expected: dict[str, Any] | None) -> None:
    call = {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"}
    body = body_of([USER, item, call, output("call_1")])
    result = retried_unknown(body, OPENAI, Policy(thinking="reject"), leaving(item["id"]))  # not a thinking policy matter
    assert result is not None
    assert result.body["input"] == [USER, *([expected] if expected else []), call, output("call_1")]
    assert retried_unknown(body, OPENAI, Policy(), leaving("msg_not_in_the_input")) is None  # nothing to leave out


async def test_a_404_for_an_unknown_item_is_sent_again_without_it(upstream) -> None:
    body = body_of(DOC.bad)
    route = scripted(upstream, "/responses", not_found("rs_fabricated"), httpx.Response(200, json=ACCEPTED))
    async with running_proxy() as proxy:
        answer = await proxy.client.post(PATH, content=orjson.dumps(body), headers=AUTH)
    assert (answer.status_code, answer.json(), route.call_count) == (200, ACCEPTED, 2)
    assert sent(route)[0] == orjson.dumps(body) and orjson.loads(sent(route)[1])["input"] == DOC.good
    assert answer.headers["x-toolmend-repairs"] == "TM409=1"


@pytest.mark.parametrize("answers", [
    [not_found("msg_not_in_the_input")],
    [not_found("rs_fabricated"), not_found("rs_fabricated")],
    [httpx.Response(404, json={"error": {"message": "Not found.", "type": "invalid_request_error", "param": None, "code": None}})],
], ids=["not-in-the-input", "refused-again", "other-404"])
async def test_any_other_404_and_the_second_one_are_relayed_as_sent(upstream, answers: list[httpx.Response]) -> None:
    route = scripted(upstream, "/responses", *answers)
    async with running_proxy() as proxy:
        answer = await proxy.client.post(PATH, json=body_of([*DOC.bad, output("call_9")][:-1]), headers=AUTH)
    assert (answer.status_code, answer.content, route.call_count) == (404, answers[-1].content, len(answers))
