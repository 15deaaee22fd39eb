"""Request headers over ``--max-header-bytes`` are refused (431) before any handler runs.

The HTTP parser accepts very large header blocks; a proxy that forwards them upstream would only get
them refused there, after spending a connection on them.
"""

from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.errors import error_response


class HeaderLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])  # "name: value\r\n"
            if size > self.max_bytes:
                response = error_response(431, f"The request headers take {size} bytes; this proxy accepts at most "
                                               f"{self.max_bytes} (--max-header-bytes).", code="headers_too_large")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
