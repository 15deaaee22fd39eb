"""What one remembered turn may hold (issue 23), in every store: a Responses stream padded with junk is remembered as its
turn alone in memory://, a SQLite file and a real redis-server, and what was left out is counted and logged. The
rest of the bounds: tests/unit/dialects/test_capture_bounds.py."""

import logging
from collections.abc import Iterator

import pytest
import respx

from tests.support.processes import RedisServer
from tests.support.proxy_fixtures import AUTH, UPSTREAM, ScriptedStream, make_settings, running_proxy, sse_response
from tests.unit.dialects.test_capture_bounds import ASKED, CALL, PADDING, PATHS, padded_stream, remembered_entries, scope
from tests.unit.dialects.test_capture_limit import abandoned


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(params=["memory", "sqlite", "redis"])
def memory(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/memory.db"
    server: RedisServer = request.getfixturevalue("redis_server")
    server.command(b"FLUSHALL")
    return server.url()


async def test_a_padded_stream_is_remembered_as_its_turn_alone_in_every_store(memory: str, caplog) -> None:
    parts = padded_stream(PADDING)
    with respx.mock(base_url=UPSTREAM) as upstream, caplog.at_level(logging.INFO, "toolmend"):
        upstream.post("/responses").mock(return_value=sse_response(ScriptedStream(parts)))
        async with running_proxy(make_settings(memory=memory)) as proxy:
            response = await proxy.client.post(PATHS["responses"], json={**ASKED["responses"], "stream": True}, headers=AUTH)
            assert response.status_code == 200 and response.content == b"".join(parts)
            found = await proxy.state.store.recall(scope("responses"), ["call_pad", "resp_pad"])
            metrics = (await proxy.client.get("/metrics")).text
    assert set(found) == {"call_pad", "resp_pad"} and remembered_entries("responses", found) == [CALL]
    assert abandoned(metrics, "bounds") == 1
    (line,) = [record.getMessage() for record in caplog.records if "left out" in record.getMessage()]
    assert f"{PADDING} left out" in line and "weather" not in line and "call_pad" not in line
