"""Everything under ``/v1/`` that no dialect repairs: forwarded unchanged, bodies streamed both ways. toolmend's own
errors here (401, 502...) come in the shape of the path's protocol: Anthropic's under ``/v1/messages/``."""

import time

from starlette.requests import Request
from starlette.responses import Response

from proxy.access import Denied
from proxy.forward import UpstreamError
from proxy.observe import line_of, observe_upstream
from proxy.protocols import error_shape_of
from proxy.relay import StreamRelay, stream_through
from proxy.router import InvalidPath
from proxy.state import ProxyState


async def pass_through(request: Request) -> Response | StreamRelay:
    state: ProxyState = request.app.state.proxy
    query = request.scope["query_string"]
    try:
        route, path = state.router.select(request.scope["raw_path"], query)
        state.access.check(request.headers.raw, query, (route,))
    except (InvalidPath, Denied) as refusal:
        return refusal.response(error_shape_of(request.scope))
    declared = request.headers.get("content-length")
    length = int(declared) if declared is not None and declared.isdigit() else None
    has_body = length is not None or "transfer-encoding" in request.headers
    upstream = route.upstream
    started = time.perf_counter()
    try:
        answer = await upstream.send(
            request.method,
            upstream.url(path, query, request.headers.raw),
            upstream.request_headers(request.headers.raw, query=query),
            request.stream() if has_body else None,
            length,
        )
    except UpstreamError as exc:
        state.metrics.upstream_errors.labels(exc.code).inc()
        return exc.response(error_shape_of(request.scope))
    observe_upstream(state.metrics, line_of(request.scope), "passthrough", answer, started)
    return stream_through(answer)
