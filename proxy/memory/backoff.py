"""Exponential backoff between attempts to reach a store that failed: never hammer a dead server."""

import asyncio
import random


class Backoff:
    """Delays that double from ``initial`` up to ``maximum`` seconds, with a little jitter so replicas that
    lost the store together do not retry in lockstep. ``reset`` after a success."""

    def __init__(self, initial: float = 0.2, maximum: float = 10.0, jitter: float = 0.1) -> None:
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self._next = initial

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.maximum)
        return delay * (1 + random.uniform(-self.jitter, self.jitter))

    async def wait(self) -> None:
        """Sleep the next delay. Waiting here rather than on a bare ``sleep`` lets a test step the schedule."""
        await asyncio.sleep(self.next_delay())

    def reset(self) -> None:
        self._next = self.initial
