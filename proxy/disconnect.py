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
import contextlib
from collections.abc import Iterator

from starlette.types import Receive


class ClientGone(Exception):
    """The client disconnected while the block was running."""


#: Seconds into a block before its watching starts (see the module's docstring).
WATCH_AFTER = 0.05


@contextlib.contextmanager
def client_watch(receive: Receive) -> Iterator[None]:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    state = {"watching": True, "left": False}
    watchers: list[asyncio.Task[None]] = []

    def on_disconnect(watcher: asyncio.Task[None]) -> None:
        # Runs on the loop between steps: only a block still running is stopped.
        if state["watching"] and not watcher.cancelled() and watcher.exception() is None:
            state["left"] = True
            task.cancel()

    def watch() -> None:
        watcher = loop.create_task(_disconnected(receive))
        watcher.add_done_callback(on_disconnect)
        watchers.append(watcher)

    starting = loop.call_later(WATCH_AFTER, watch)
    try:
        yield
    except asyncio.CancelledError:
        if not state["left"]:
            raise
        task.uncancel()  # our own cancellation, taken back: the caller learns why instead
        raise ClientGone from None
    finally:
        state["watching"] = False
        starting.cancel()
        for watcher in watchers:
            watcher.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
