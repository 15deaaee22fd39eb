"""Stopping work for a client that has already gone.

An LLM call can run for minutes and costs money while it runs. When the client disconnects before the
upstream has answered (an SDK timing out and retrying, a user pressing stop) the upstream request is
cancelled at once, and when it leaves mid-stream the relay stops at once, not when the next chunk arrives.

``client_watch`` is the one mechanism for both: while its block runs, a disconnect cancels the block's
task where it waits; the block then ends with ``ClientGone`` (a cancellation from anywhere else, such as
a shutdown, goes through unchanged). Only for requests whose body has been read completely: from then on
the next ASGI message can only be ``http.disconnect``.

The watching starts ``WATCH_AFTER`` into the block: a task waiting for the disconnect, made and cancelled for
every request, is a cost every request would pay, and most blocks that end within that time are answers from a
fast upstream, or an SSE stream's last chunks. A client that leaves earlier is noticed ``WATCH_AFTER`` late.
"""

import asyncio
from types import TracebackType

from starlette.types import Receive


class ClientGone(Exception):
    """The client disconnected while the block was running."""


#: Seconds into a block before its watching starts (see the module's docstring).
WATCH_AFTER = 0.05


def client_watch(receive: Receive) -> "_ClientWatch":
    """The context manager of the module's docstring, for the running task."""
    return _ClientWatch(receive)


class _ClientWatch:
    """A class, not a generator: entered and left on every request (a generator-based context manager costs a frame
    and its resumptions more)."""

    __slots__ = ("left", "loop", "receive", "starting", "task", "watcher", "watching")

    def __init__(self, receive: Receive) -> None:
        self.receive = receive

    def __enter__(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        self.loop = asyncio.get_running_loop()
        self.watching, self.left = True, False
        self.watcher: asyncio.Task[None] | None = None
        self.starting = self.loop.call_later(WATCH_AFTER, self._watch)

    def _watch(self) -> None:
        watcher = self.watcher = self.loop.create_task(_disconnected(self.receive))
        watcher.add_done_callback(self._on_disconnect)

    def _on_disconnect(self, watcher: "asyncio.Task[None]") -> None:
        # Runs on the loop between steps: only a block still running is stopped.
        if self.watching and not watcher.cancelled() and watcher.exception() is None:
            self.left = True
            self.task.cancel()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        self.watching = False
        self.starting.cancel()
        if self.watcher is not None:
            self.watcher.cancel()
        if kind is not None and issubclass(kind, asyncio.CancelledError) and self.left:
            self.task.uncancel()  # our own cancellation, taken back: the caller learns why instead
            raise ClientGone from None


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
