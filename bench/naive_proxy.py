"""The naive pass-through baseline: Starlette + one shared httpx.AsyncClient.

Every request is forwarded unchanged to the upstream and the answer is streamed back as it
arrives (client.send(..., stream=True) + StreamingResponse(aiter_raw)). It does no repair and
no parsing: it is the floor any Python proxy built on this stack starts from.

    python bench/naive_proxy.py --upstream http://127.0.0.1:8080/v1 --port 8001

The upstream may be an origin (http://host:port) or an OpenAI base URL ending in /v1; a
request for /v1/chat/completions goes to <upstream>/chat/completions in the latter case.
Runs under uvicorn with uvloop and httptools, access log off.
"""

from __future__ import annotations

import argparse
import contextlib

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


def build_app(upstream: str) -> Starlette:
    upstream = upstream.rstrip("/")
    strip_v1 = upstream.endswith("/v1")
    client = httpx.AsyncClient(timeout=httpx.Timeout(600.0))

    async def forward(request: Request) -> StreamingResponse:
        path = request.url.path
        if strip_v1 and (path == "/v1" or path.startswith("/v1/")):
            path = path[3:]
        url = upstream + path
        if request.url.query:
            url += "?" + request.url.query
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        body = await request.body()
        upstream_request = client.build_request(request.method, url, headers=headers, content=body)
        response = await client.send(upstream_request, stream=True)
        out_headers = {
            k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP
        }
        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            headers=out_headers,
            background=BackgroundTask(response.aclose),
        )

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
    routes = [Route("/{path:path}", forward, methods=methods)]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        await client.aclose()

    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="upstream origin or base URL")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.upstream),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
