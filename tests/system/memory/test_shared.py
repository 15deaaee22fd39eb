"""One memory across processes: replicas sharing Redis, workers sharing the default SQLite file, restarts,
and a Redis outage. Real processes (``python -m proxy serve``), a real redis-server, the official openai
client and the strict upstream; each agent's framework drops the assistant ``tool_calls`` from its
history, so every second request only succeeds exactly if the proxy that gets it recalls calls that
another process remembered.
"""

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import orjson
import pytest

from tests.support.processes import HANG_GUARD, ProxyProcess, RedisServer, children, process_of_local_port, wait_until
from tests.support.strict_upstream import Recorder, make_strict_upstream, serve

TOOLS = [
    {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "time", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
]
MEMORY_HEADER = "x-toolmend-memory"


class Upstream:
    """The strict upstream, recording the client port of each chat request (which proxy process sent it)."""

    def __init__(self) -> None:
        self.app, self.recorder = make_strict_upstream(skip_rules=("S12",))
        self.ports: list[int] = []
        self._lock = threading.Lock()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            with self._lock:
                self.ports.append(scope["client"][1])
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, Upstream]]:
    app = Upstream()
    with serve(app) as url:
        yield url + "/v1", app


@pytest.fixture
def recorder(upstream: tuple[str, Upstream]) -> Recorder:
    upstream[1].recorder.reset()
    return upstream[1].recorder


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def state_env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state")}  # never the real per-user directory


class Agent:
    """A forgetful agent: keeps the text and the tool results of a tool-call answer, drops its calls."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.history: list[dict] = [{"role": "user", "content": "Go"}]
        self.emitted: list[list[dict]] = []  # every call turn the upstream sent this agent, as the client saw it

    def client(self, proxy: ProxyProcess, fresh_connection: bool = False) -> openai.OpenAI:
        http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=10) if fresh_connection else None
        return openai.OpenAI(base_url=proxy.url + "/v1", api_key=self.key, max_retries=0, timeout=10, http_client=http)

    def ask(self, proxy: ProxyProcess, fresh_connection: bool = False) -> list[dict]:
        """Turn 1: the upstream answers with tool calls; the history keeps only their results."""
        answer = self.client(proxy, fresh_connection).chat.completions.create(model="gpt-strict-test", messages=self.history, tools=TOOLS)
        calls = [call.model_dump(exclude_none=True) for call in answer.choices[0].message.tool_calls or []]
        assert calls
        self.emitted.append(calls)
        self.history += [{"role": "tool", "tool_call_id": call["id"], "content": f"{call['function']['name']}: ok"} for call in calls]
        return calls

    def answer(self, proxy: ProxyProcess, fresh_connection: bool = False):
        """Turn 2: the results go back without their calls; the proxy must restore them."""
        raw = self.client(proxy, fresh_connection).chat.completions.with_raw_response.create(
            model="gpt-strict-test", messages=self.history, tools=TOOLS)
        text = raw.parse().choices[0].message.content
        self.history += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Again {len(self.emitted)}"}]
        return raw


def assert_exact_calls_arrived(recorder: Recorder, agent: Agent) -> None:
    """The upstream's last request holds every call turn it sent this agent, exactly, in order."""
    last = recorder.last.json["messages"]
    assert [m["tool_calls"] for m in last if m.get("role") == "assistant" and m.get("tool_calls")] == agent.emitted
    for turn in agent.emitted:
        for call in turn:
            assert orjson.dumps(call["function"]["arguments"]) in recorder.last.body_bytes  # the text, not a re-encoding


def test_replicas_behind_a_load_balancer_share_one_redis(upstream, recorder, redis_server: RedisServer, tmp_path) -> None:
    url, _ = upstream
    memory = ("--memory", redis_server.url(1))
    with ProxyProcess(url, *memory, env=state_env(tmp_path)) as a, ProxyProcess(url, *memory, env=state_env(tmp_path)) as b:
        agent = Agent("sk-replicas")
        for first, second in ((a, b), (b, a), (a, b)):
            agent.ask(first)
            raw = agent.answer(second)
            assert raw.headers["x-toolmend-repairs"] == f"TM101={len(agent.emitted)}"
            assert MEMORY_HEADER not in raw.headers
            assert_exact_calls_arrived(recorder, agent)
        # Another tenant replaying those call ids through the other replica gets nothing of them.
        thief = Agent("sk-another-tenant")
        thief.history += agent.history[1:3]  # the tool results of the first turn
        assert thief.answer(b).headers["x-toolmend-repairs"].startswith("TM101=")
        sent = [m for m in recorder.last.json["messages"] if m.get("tool_calls")]
        assert [c["function"]["arguments"] for m in sent for c in m["tool_calls"]] == ["{}", "{}"]
    assert recorder.rejections == []


def test_workers_of_one_machine_share_the_default_sqlite_file(upstream, recorder, tmp_path) -> None:
    url, app = upstream
    with ProxyProcess(url, "--workers", "2", env=state_env(tmp_path)) as proxy:
        def spawned_workers() -> list[int]:
            pids = [p for p in children(proxy.proc.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
            return pids if len(pids) == 2 else []

        workers = wait_until(spawned_workers, HANG_GUARD, "two uvicorn workers")
        agent = Agent("sk-workers")
        served: list[tuple[int | None, int | None]] = []

        def worker_of_last_request() -> int | None:
            return process_of_local_port(app.ports[-1], workers)

        for _ in range(40):
            agent.ask(proxy, fresh_connection=True)
            first = worker_of_last_request()
            raw = agent.answer(proxy, fresh_connection=True)
            served.append((first, worker_of_last_request()))
            assert raw.headers["x-toolmend-repairs"] == f"TM101={len(agent.emitted)}"
            assert_exact_calls_arrived(recorder, agent)
            if len({w for pair in served for w in pair} - {None}) == 2 and any(x != y and None not in (x, y) for x, y in served):
                break
        both = {w for pair in served for w in pair} - {None}
        assert len(both) == 2, f"only one worker served: {served}"
        assert any(x != y and None not in (x, y) for x, y in served), f"no turn crossed workers: {served}"
    assert (tmp_path / "state" / "toolmend" / "memory.db").exists()
    assert recorder.rejections == []


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_a_restart_between_turns_loses_nothing(upstream, recorder, redis_server: RedisServer, tmp_path, backend) -> None:
    url, _ = upstream
    memory = redis_server.url(2) if backend == "redis" else f"sqlite://{tmp_path}/memory.db"
    proxy = ProxyProcess(url, "--memory", memory, env=state_env(tmp_path))
    agent = Agent(f"sk-restart-{backend}")
    with proxy:
        for _ in range(2):
            agent.ask(proxy)
            assert proxy.stop() in (0, -15)  # SIGTERM straight after the answer: its turn was written before it ended
            assert proxy.log().count("Application shutdown complete") == len(agent.emitted)  # graceful, not killed
            proxy.start()
            raw = agent.answer(proxy)
            assert raw.headers["x-toolmend-repairs"] == f"TM101={len(agent.emitted)}"
            assert_exact_calls_arrived(recorder, agent)


def test_redis_outage_degrades_to_the_orphan_policy_and_recovers(upstream, recorder, tmp_path) -> None:
    url, _ = upstream
    with RedisServer() as redis, ProxyProcess(url, "--memory", redis.url(), env=state_env(tmp_path)) as proxy:
        agent = Agent("sk-outage")
        agent.ask(proxy)
        assert MEMORY_HEADER not in agent.answer(proxy).headers
        assert_exact_calls_arrived(recorder, agent)

        redis.stop()
        for _ in range(3):
            agent.ask(proxy)
            raw = agent.answer(proxy)
            assert raw.http_response.status_code == 200
            assert raw.headers[MEMORY_HEADER] == "unavailable"
            assert raw.headers["x-toolmend-repairs"].startswith("TM101=")
            sent = [c for m in recorder.last.json["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
            assert {c["function"]["arguments"] for c in sent} == {"{}"}  # synthesized by the orphan policy
        ready = httpx.get(proxy.url + "/readyz", timeout=5)
        assert ready.status_code == 200 and ready.json()["status"] == "degraded"
        assert "memory store unavailable backend=redis" in proxy.log()

        redis.start()
        wait_until(lambda: httpx.get(proxy.url + "/readyz", timeout=5).json()["status"] == "ready", HANG_GUARD, "recovery", 0.1)
        fresh = Agent("sk-outage-after")
        for _ in range(2):
            fresh.ask(proxy)
            raw = fresh.answer(proxy)
            assert MEMORY_HEADER not in raw.headers
            assert_exact_calls_arrived(recorder, fresh)
        assert "memory store available again backend=redis" in proxy.log()
    assert recorder.rejections == []
