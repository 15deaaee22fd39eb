"""``POST /v1/chat/completions``: read, parse, recall, repair, forward, relay and remember.

Each step is a small function; the handler only strings them together. A request that needs no repair
is forwarded as the exact bytes the client sent.
"""

import logging
import uuid
from collections import Counter

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from proxy.disconnect import ClientGone, unless_client_leaves
from proxy.errors import error_response
from proxy.forward import UpstreamError
from proxy.relay import StreamRelay, relay_chat
from proxy.repair import Finding, needs_repair, recall_ids, repair
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
    denied = state.authorize(request.headers.raw)
    if denied is not None:
        return denied
    try:
        body = await read_body(request, state.settings.max_body_bytes)
    except BodyTooLarge:
        return error_response(413, f"Request body is larger than {state.settings.max_body_bytes} bytes.", code="request_too_large")
    except ClientDisconnect:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return error_response(400, f"We could not parse the JSON body of your request: {exc}", code="invalid_json")
    if type(parsed) is not dict:
        return error_response(400, "The request body must be a JSON object.", code="invalid_json")

    tenant = state.tenant(request.headers.raw)
    outgoing, extra_headers = body, []
    if needs_repair(parsed, state.profile):
        result = await _repair(state, tenant, parsed)
        if result.rejected is not None:
            return _rejection(result.rejected)
        if result.changed:
            outgoing = orjson.dumps(result.body)
            summary = summarize(result.findings)
            extra_headers.append((REPAIRS_HEADER, summary.encode()))
            log.info("repaired request_id=%s tenant=%s repairs=%s", _request_id(request), tenant[:8], summary)

    upstream = state.upstream
    sending = upstream.send(
        "POST",
        upstream.url(request.scope["raw_path"], request.scope["query_string"]),
        upstream.request_headers(request.headers.raw, DROP_FOR_CHAT),
        outgoing,
    )
    try:
        answer = await unless_client_leaves(sending, request.receive)
    except UpstreamError as exc:
        return exc.response()
    except ClientGone:
        log.info("client left before the upstream answered; upstream request cancelled request_id=%s", _request_id(request))
        return Response(status_code=CLIENT_CLOSED_REQUEST)

    if not state.store.available:
        extra_headers.append(MEMORY_HEADER)

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


async def _repair(state: ProxyState, tenant: str, parsed: dict):
    ids = recall_ids(parsed, state.profile)
    recalled = await state.store.recall(tenant, ids) if ids else {}
    return repair(parsed, recall=lambda _ids: recalled, profile=state.profile, policy=state.policy)


def summarize(findings: tuple[Finding, ...]) -> str:
    """Rule codes with counts, in first-seen order: ``TM101=1,TM104=2``."""
    counts = Counter(finding.code for finding in findings)
    return ",".join(f"{code}={count}" for code, count in counts.items())


def _rejection(finding: Finding) -> Response:
    return error_response(
        400,
        f"toolmend {finding.code} ({finding.name}) at messages[{finding.index}]: {finding.detail}. "
        "The history cannot be repaired under the configured orphan policy.",
        param=f"messages.[{finding.index}]",
        code=f"toolmend_{finding.name.replace('-', '_')}",
    )


def _request_id(request: Request) -> str:
    return request.headers.get("x-request-id") or uuid.uuid4().hex
