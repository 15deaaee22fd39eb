"""Giving up on the upstream when the client has already gone.

An LLM call can run for minutes and costs money while it runs. When the client disconnects before the
upstream has even answered (an SDK timing out and retrying, a user pressing stop), the upstream request
is cancelled at once instead of running to completion for nobody.
"""

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.types import Receive

T = TypeVar("T")


class ClientGone(Exception):
    """The client disconnected before the upstream answered."""


async def unless_client_leaves(work: Coroutine[Any, Any, T], receive: Receive) -> T:
    """Await ``work``, cancelling it if the client disconnects first.

    Only for requests whose body has been read completely: from then on the next ASGI message can only be
    ``http.disconnect``.
    """
    loop = asyncio.get_running_loop()
    answer = loop.create_task(work)
    left = loop.create_task(_disconnected(receive))
    first: asyncio.Future[None] = loop.create_future()

    def settle(_: asyncio.Future) -> None:
        if not first.done():
            first.set_result(None)

    answer.add_done_callback(settle)
    left.add_done_callback(settle)
    try:
        await first
    except BaseException:
        answer.cancel()
        left.cancel()
        raise
    if answer.done():
        left.cancel()
        return answer.result()
    answer.cancel()
    try:
        await answer
    except BaseException:  # noqa: BLE001 - whatever the cancelled work ends with, the client is gone
        pass
    raise ClientGone


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
