"""``POST /v1/chat/completions``: read, parse, recall, repair, forward, relay and remember.

Each step is a small function; the handler only strings them together. A request that needs no repair
is forwarded as the exact bytes the client sent.
"""

import asyncio
import gc
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from proxy.access import Denied
from proxy.config import Settings
from proxy.dialects.capture import CaptureLimit
from proxy.dialects.chat.capture import CAPTURE
from proxy.disconnect import ClientGone, client_watch
from proxy.errors import error_response
from proxy.forward import UpstreamError
from proxy.logs import RequestLine
from proxy.observe import line_of, observe_upstream
from proxy.relay import StreamRelay, relay_answer
from proxy.repair import Finding, Plan, Policy, Profile, Result, plan
from proxy.repair.engine import TOO_DEEP
from proxy.repair.findings import CallSource, calls_by_source, summarize_calls
from proxy.router import InvalidPath, UpstreamRoute
from proxy.state import ProxyState
from proxy.turns import Turn

log = logging.getLogger("toolmend")
T = TypeVar("T")

REPAIRS_HEADER = b"x-toolmend-repairs"
#: On repaired requests that had tool calls put back: how many came from memory and how many were made up.
CALLS_HEADER = b"x-toolmend-calls"
#: On responses served while the memory store is down: calls were neither recalled nor stored this time.
MEMORY_HEADER = (b"x-toolmend-memory", b"unavailable")
# The proxy parses chat answers to remember tool calls, so it asks the upstream for them uncompressed.
DROP_FOR_CHAT = frozenset((b"accept-encoding",))


#: nginx's status for "the client closed the request": logged, never seen by the departed client.
CLIENT_CLOSED_REQUEST = 499


class BodyTooLarge(Exception):
    pass


class Refused(Exception):
    """A step ends the request early with this answer (an OpenAI-shaped error, mostly)."""

    def __init__(self, response: Response) -> None:
        self.response = response


async def chat_completions(request: Request) -> Response | StreamRelay:
    state: ProxyState = request.app.state.proxy
    line = line_of(request.scope)
    headers, query = request.headers.raw, request.scope["query_string"]
    try:
        route, path = state.router.by_target(request.scope["raw_path"], query)
        # Refused before the body is read when no route the model could pick would admit this client.
        state.access.check(headers, query, state.router.reachable(route))
        body, parsed = await _read_request(request, state.settings)
        route = state.router.by_model(route, parsed.get("model"))
        state.access.check(headers, query, (route,))
        tenant = route.tenant(headers, query)
        line.tenant, line.profile = tenant[:8], route.profile.name
        outgoing, extra_headers = await _repair_request(state, route.profile, tenant, body, parsed, line)
        answer = await _forward(request, state, route, path, outgoing, line)
    except Refused as refused:
        return refused.response
    except (InvalidPath, Denied) as refusal:
        return refusal.response()
    if not state.store.available:
        extra_headers.append(MEMORY_HEADER)
        line.memory = "unavailable"

    async def remember(turns: list[Turn]) -> None:
        await state.store.remember(tenant, turns)

    limit = CaptureLimit(state.settings.max_capture_bytes, state.metrics.capture_gave_up)
    return await relay_answer(answer, CAPTURE, remember, limit, extra_headers)


async def _read_request(request: Request, settings: Settings) -> tuple[bytes, dict]:
    """The body as sent and parsed, within the size, time and message limits."""
    try:
        body = await read_body(request, settings.max_body_bytes)  # in time: limits.BodyDeadline
    except BodyTooLarge:
        raise Refused(error_response(413, f"Request body is larger than {settings.max_body_bytes} bytes (--max-body-bytes).",
                                     code="request_too_large")) from None
    except ClientDisconnect:
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    try:
        parsed = _parse(body)
    except orjson.JSONDecodeError as exc:
        raise Refused(error_response(400, f"We could not parse the JSON body of your request: {exc}", code="invalid_json")) from None
    if type(parsed) is not dict:
        raise Refused(error_response(400, "The request body must be a JSON object.", code="invalid_json"))
    messages = parsed.get("messages")
    if type(messages) is list and len(messages) > settings.max_messages:
        raise Refused(error_response(
            400, f"The request has {len(messages)} messages; this proxy accepts at most {settings.max_messages} (--max-messages).",
            param="messages", code="too_many_messages"))
    return body, parsed


async def _repair_request(state: ProxyState, profile: Profile, tenant: str, body: bytes, parsed: dict,
                          line: RequestLine) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """What to send upstream: the client's own bytes, or the repaired body (with the header saying so).

    The engine's work on a large body runs in a thread so that other clients are not kept waiting: the
    engine is pure Python, which gives the event loop the interpreter back every few milliseconds."""
    run = _in_thread if len(body) > LARGE_BODY_BYTES else _inline
    planned = await run(plan, parsed, profile)
    if planned is None:
        return body, []
    recalled = await _recall(state, tenant, planned.recall)
    result, outgoing, counts, calls = await run(_repaired, planned, recalled, state.policy)
    if result.rejected is not None:
        raise Refused(_rejection(result.rejected))
    if not result.changed:
        return body, []
    if outgoing is None:
        raise Refused(error_response(400, f"toolmend cannot repair this request: {TOO_DEEP}.", code="toolmend_too_deep"))
    line.repairs = summarize(counts)
    for code, count in counts.items():
        state.metrics.repairs.labels(code, profile.name).inc(count)
    headers = [(REPAIRS_HEADER, line.repairs.encode())]
    if calls:
        line.calls = summarize_calls(calls)
        for source, count in calls.items():
            state.metrics.calls_reinserted.labels(source, profile.name).inc(count)
        headers.append((CALLS_HEADER, line.calls.encode()))
    return outgoing, headers


async def _forward(request: Request, state: ProxyState, route: UpstreamRoute, path: bytes, outgoing: bytes,
                   line: RequestLine) -> httpx.Response:
    """Send upstream and wait for the answer's head, giving up if the client leaves meanwhile."""
    upstream = route.upstream
    sending = upstream.send(
        "POST",
        upstream.url(path, request.scope["query_string"]),
        upstream.request_headers(request.headers.raw, DROP_FOR_CHAT),
        outgoing,
    )
    started = time.perf_counter()
    try:
        with client_watch(request.receive):
            answer = await sending
    except UpstreamError as exc:
        state.metrics.upstream_errors.labels(exc.code).inc()
        raise Refused(exc.response()) from None
    except ClientGone:
        log.info("client left before the upstream answered; upstream request cancelled")
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    observe_upstream(state.metrics, line, "chat", answer, started)
    return answer


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


#: Bodies larger than this are parsed with the cycle collector paused, and checked and repaired in a thread.
#: A broken history of this size (about 2,000 messages) takes some 10 ms to repair; below it, the thread
#: hand-off would cost more than it saves.
LARGE_BODY_BYTES = 256 * 1024


def _parse(body: bytes) -> Any:
    """``orjson.loads``; for a large body, with the cycle collector paused. The parse holds the interpreter
    throughout (a thread would not help), and the collections its allocations trigger walk the growing tree
    again and again: 25 MB took 1.5 s instead of 0.4 s, all of it a stall for every other client."""
    if len(body) <= LARGE_BODY_BYTES or not gc.isenabled():
        return orjson.loads(body)
    gc.disable()
    try:
        return orjson.loads(body)
    finally:
        gc.enable()


async def _inline(function: Callable[..., T], *args: Any) -> T:
    return function(*args)


async def _in_thread(function: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(function, *args)


def _repaired(planned: Plan, recalled: dict[str, Turn], policy: Policy) -> tuple[Result, bytes | None, Counter[str], Counter[CallSource]]:
    """The engine's result; when it changed the body, the body to send (None if too deep to encode), the
    findings counted by rule code and the calls they put back counted by source (a large history can have
    hundreds of thousands of findings: counted here, in the thread, too)."""
    result = planned.repair(recalled, policy)
    if not result.changed:
        return result, None, Counter(), Counter()
    counts = Counter(finding.code for finding in result.findings)
    calls = calls_by_source(result.findings)
    try:
        return result, orjson.dumps(result.body), counts, calls
    except orjson.JSONEncodeError:
        return result, None, counts, calls


async def _recall(state: ProxyState, tenant: str, ids: list[str]) -> dict[str, Turn]:
    if not ids:
        return {}
    recalled = await state.store.recall(tenant, ids)
    recalls = state.metrics.recalls
    if not state.store.available:
        recalls.labels(state.store.backend, "error").inc(len(ids))
    else:
        recalls.labels(state.store.backend, "hit").inc(len(recalled))
        recalls.labels(state.store.backend, "miss").inc(len(ids) - len(recalled))
    return recalled


def summarize(counts: Counter[str]) -> str:
    """Rule codes with counts, in first-seen order: ``TM101=1,TM104=2``."""
    return ",".join(f"{code}={count}" for code, count in counts.items())


def _rejection(finding: Finding) -> Response:
    why = " under the configured orphan policy (--orphan-policy)" if finding.code == "TM101" else ""
    return error_response(
        400,
        f"toolmend {finding.code} ({finding.name}) at messages[{finding.index}]: {finding.detail}. "
        f"The history cannot be repaired{why}.",
        param=f"messages.[{finding.index}]",
        code=f"toolmend_{finding.name.replace('-', '_')}",
    )

