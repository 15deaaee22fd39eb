"""Claude Code posts to ``/v1/messages?beta=true`` (the SDK's ``beta.messages``; ``count_tokens`` alike): those targets
are the Messages endpoints, repaired like the plain paths, and the query string reaches the upstream as the client sent it."""

import httpx
import orjson
import pytest
import respx

from tests.support.proxy_fixtures import UPSTREAM, make_settings, running_proxy

ANSWER = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [{"type": "text", "text": "ok"}],
          "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
#: A result whose tool_use the client lost (AM-4): repaired with a synthesized tool_use (TM101).
ORPHAN = {"model": "claude-opus-4-8", "max_tokens": 64, "messages": [
    {"role": "user", "content": "Weather?"},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}]}]}


@pytest.mark.parametrize("path", ["/messages", "/messages/count_tokens"])
@pytest.mark.parametrize("query", ["beta=true", "beta=true&x=%2F1"])
async def test_a_broken_body_posted_with_a_query_is_repaired_and_the_query_reaches_the_upstream(path: str, query: str) -> None:
    with respx.mock(base_url=UPSTREAM, assert_all_called=True) as upstream:
        route = upstream.post(path).mock(return_value=httpx.Response(200, json=ANSWER))
        async with running_proxy(make_settings(profile="anthropic")) as proxy:
            answer = await proxy.client.post(f"/v1{path}?{query}", content=orjson.dumps(ORPHAN),
                                             headers={"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-toolmend-repairs"] == "TM101=1"
    sent = route.calls.last.request
    assert sent.url.raw_path == f"/v1{path}?{query}".encode()
    assert orjson.loads(sent.content)["messages"][1]["content"][0]["type"] == "tool_use"
