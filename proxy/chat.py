"""``POST /v1/chat/completions``: read, parse, recall, repair, forward, relay and remember.

Each step is a small function; the handler only strings them together. A request that needs no repair
is forwarded as the exact bytes the client sent.
"""

import asyncio
import logging
import time
from collections import Counter

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from proxy.disconnect import ClientGone, unless_client_leaves
from proxy.errors import error_response
from proxy.forward import UpstreamError
from proxy.observe import line_of, observe_upstream
from proxy.relay import StreamRelay, relay_chat
from proxy.repair import Finding, Profile, needs_repair, recall_ids, repair
from proxy.repair.engine import TOO_DEEP
from proxy.state import ProxyState
from proxy.turns import Turn

log = logging.getLogger("toolmend")

REPAIRS_HEADER = b"x-toolmend-repairs"
#: On responses served while the memory store is down: calls were neither recalled nor stored this time.
MEMORY_HEADER = (b"x-toolmend-memory", b"unavailable")
# The proxy parses chat answers to remember tool calls, so it asks the upstream for them uncompressed.
DROP_FOR_CHAT = frozenset((b"accept-encoding",))


#: nginx's status for "the client closed the request": logged, never seen by the departed client.
CLIENT_CLOSED_REQUEST = 499


class BodyTooLarge(Exception):
    pass


async def chat_completions(request: Request) -> Response | StreamRelay:
    state: ProxyState = request.app.state.proxy
    line = line_of(request.scope)
    route, path = state.route_for_path(request.scope["raw_path"])
    denied = state.authorize(request.headers.raw, route)
    if denied is not None:
        return denied
    settings = state.settings
    try:
        async with asyncio.timeout(settings.client_timeout):
            body = await read_body(request, settings.max_body_bytes)
    except BodyTooLarge:
        return error_response(413, f"Request body is larger than {settings.max_body_bytes} bytes (--max-body-bytes).", code="request_too_large")
    except TimeoutError:
        return error_response(408, f"The request body did not arrive within {settings.client_timeout:g} s (--client-timeout).", code="request_timeout")
    except ClientDisconnect:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return error_response(400, f"We could not parse the JSON body of your request: {exc}", code="invalid_json")
    if type(parsed) is not dict:
        return error_response(400, "The request body must be a JSON object.", code="invalid_json")
    messages = parsed.get("messages")
    if type(messages) is list and len(messages) > settings.max_messages:
        return error_response(400, f"The request has {len(messages)} messages; this proxy accepts at most {settings.max_messages} (--max-messages).",
                              param="messages", code="too_many_messages")

    if route is state.default and state.routes:
        route = state.route_for_model(parsed.get("model"))
    tenant = state.tenant(request.headers.raw, route)
    profile = route.profile
    if line is not None:
        line.tenant, line.profile = tenant[:8], profile.name
    outgoing, extra_headers = body, []
    if needs_repair(parsed, profile):
        result = await _repair(state, tenant, parsed, profile)
        if result.rejected is not None:
            return _rejection(result.rejected)
        if result.changed:
            try:
                outgoing = orjson.dumps(result.body)
            except orjson.JSONEncodeError:
                return error_response(400, f"toolmend cannot repair this request: {TOO_DEEP}.", code="toolmend_too_deep")
            summary = summarize(result.findings)
            extra_headers.append((REPAIRS_HEADER, summary.encode()))
            if line is not None:
                line.repairs = summary
            for finding in result.findings:
                state.metrics.repairs.labels(finding.code, profile.name).inc()

    upstream = route.upstream
    sending = upstream.send(
        "POST",
        upstream.url(path, request.scope["query_string"]),
        upstream.request_headers(request.headers.raw, DROP_FOR_CHAT),
        outgoing,
    )
    started = time.perf_counter()
    try:
        answer = await unless_client_leaves(sending, request.receive)
    except UpstreamError as exc:
        state.metrics.upstream_errors.labels(exc.code).inc()
        return exc.response()
    except ClientGone:
        log.info("client left before the upstream answered; upstream request cancelled")
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    observe_upstream(state.metrics, line, "chat", answer, started)

    if not state.store.available:
        extra_headers.append(MEMORY_HEADER)
        if line is not None:
            line.memory = "unavailable"

    async def remember(turns: list[Turn]) -> None:
        await state.store.remember(tenant, turns)

    return await relay_chat(answer, remember, extra_headers)


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


async def _repair(state: ProxyState, tenant: str, parsed: dict, profile: Profile):
    ids = recall_ids(parsed, profile)
    recalled = {}
    if ids:
        recalled = await state.store.recall(tenant, ids)
        recalls = state.metrics.recalls
        if not state.store.available:
            recalls.labels(state.store.backend, "error").inc(len(ids))
        else:
            recalls.labels(state.store.backend, "hit").inc(len(recalled))
            recalls.labels(state.store.backend, "miss").inc(len(ids) - len(recalled))
    return repair(parsed, recall=lambda _ids: recalled, profile=profile, policy=state.policy)


def summarize(findings: tuple[Finding, ...]) -> str:
    """Rule codes with counts, in first-seen order: ``TM101=1,TM104=2``."""
    counts = Counter(finding.code for finding in findings)
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

