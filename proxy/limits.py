"""Every request body must arrive within ``--client-timeout``, chat or pass-through alike (408 after, in the
request's error shape: Anthropic's under ``/v1/messages``).

The clock counts only the time spent waiting for the client: while the proxy itself is busy (waiting for
an upstream slot, or for the upstream to take the bytes already read) it is stopped. A pass-through body
streams straight into the upstream request, so a client that stalls mid-body would otherwise hold an
upstream slot for as long as it likes.

The limits that hold before a request reaches the app (header size, head timeout, connections, a client
that stops reading) are the server's: see ``proxy/server.py``.
"""

import asyncio
import logging
from types import TracebackType

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.protocols import error_shape_of

log = logging.getLogger("toolmend")


class BodyTimeout(Exception):
    """The client took longer than ``--client-timeout`` to send its request body."""


class BodyDeadline:
    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        left = self.seconds
        body_read = False
        answered = False

        async def receive_in_time() -> Message:
            nonlocal left, body_read
            if body_read:
                return await receive()  # only a disconnect can come now: waiting for it is not the client's delay
            began = loop.time()
            with _Deadline(loop, left):
                message = await receive()
            left -= loop.time() - began
            body_read = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def send_noting_answer(message: Message) -> None:
            nonlocal answered
            answered = True
            await send(message)

        try:
            await self.app(scope, receive_in_time, send_noting_answer)
        except BodyTimeout:
            if answered:  # the answer has begun: all that is left is to end the connection
                log.info("request body slower than %g s (--client-timeout) after the answer began", self.seconds)
                return
            response = error_shape_of(scope)(408, f"The request body did not arrive within {self.seconds:g} s (--client-timeout).",
                                      code="request_timeout", headers={"connection": "close"})
            await response(scope, receive, send)


class _Deadline:
    """``asyncio.timeout(seconds)`` around the block, ending it with ``BodyTimeout``: a plain context manager, which
    every request enters and leaves without the two coroutines of an ``async with``."""

    __slots__ = ("cancelling", "fired", "handle", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.task, self.cancelling, self.fired = task, task.cancelling(), False
        self.handle = loop.call_later(seconds, self._fire)

    def _fire(self) -> None:
        self.fired = True
        self.task.cancel()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        self.handle.cancel()
        # As asyncio.timeout: our cancellation taken back; a cancellation from elsewhere goes on.
        if self.fired and self.task.uncancel() <= self.cancelling and kind is asyncio.CancelledError:
            raise BodyTimeout from None
