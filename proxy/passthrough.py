"""Everything under ``/v1/`` other than chat completions: forwarded unchanged, bodies streamed both ways."""

from starlette.requests import Request
from starlette.responses import Response

from proxy.forward import UpstreamError
from proxy.relay import StreamRelay, stream_through
from proxy.state import ProxyState


async def pass_through(request: Request) -> Response | StreamRelay:
    state: ProxyState = request.app.state.proxy
    denied = state.authorize(request.headers.raw)
    if denied is not None:
        return denied
    declared = request.headers.get("content-length")
    length = int(declared) if declared is not None and declared.isdigit() else None
    has_body = length is not None or "transfer-encoding" in request.headers
    upstream = state.upstream
    try:
        answer = await upstream.send(
            request.method,
            upstream.url(request.scope["raw_path"], request.scope["query_string"]),
            upstream.request_headers(request.headers.raw),
            request.stream() if has_body else None,
            length,
        )
    except UpstreamError as exc:
        return exc.response()
    return stream_through(answer)
