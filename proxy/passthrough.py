"""Everything under ``/v1/`` other than chat completions: forwarded unchanged, bodies streamed both ways."""

import time

from starlette.requests import Request
from starlette.responses import Response

from proxy.forward import UpstreamError
from proxy.observe import line_of, observe_upstream
from proxy.relay import StreamRelay, stream_through
from proxy.state import ProxyState


async def pass_through(request: Request) -> Response | StreamRelay:
    state: ProxyState = request.app.state.proxy
    route, path = state.route_for_path(request.scope["raw_path"])
    denied = state.authorize(request.headers.raw, route)
    if denied is not None:
        return denied
    declared = request.headers.get("content-length")
    length = int(declared) if declared is not None and declared.isdigit() else None
    has_body = length is not None or "transfer-encoding" in request.headers
    upstream = route.upstream
    started = time.perf_counter()
    try:
        answer = await upstream.send(
            request.method,
            upstream.url(path, request.scope["query_string"]),
            upstream.request_headers(request.headers.raw),
            request.stream() if has_body else None,
            length,
        )
    except UpstreamError as exc:
        state.metrics.upstream_errors.labels(exc.code).inc()
        return exc.response()
    observe_upstream(state.metrics, line_of(request.scope), "passthrough", answer, started)
    return stream_through(answer)
