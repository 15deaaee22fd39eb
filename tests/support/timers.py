"""A stepped clock for the running loop's ``call_later`` timers (and so ``asyncio.sleep``): a test sees which timers
the code under test set and runs them when it chooses, so it never waits for time to pass. ``asyncio.timeout`` uses
``call_at`` and is left to the real clock: a hang guard still fires.

``stepped_timers`` is a fixture: a test module that uses it imports it by name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class Timers:
    """A stepped clock for the running loop's timers: each ``call_later`` is recorded, and runs only when ``fire``d."""

    loop: asyncio.AbstractEventLoop
    later: list[tuple[float, asyncio.Handle, Callable[..., Any], tuple[Any, ...]]] = field(default_factory=list)

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any, context: Any = None) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self.loop, context)
        self.later.append((delay, handle, callback, args))
        return handle

    def fire(self) -> None:
        """The clock reaches every timer set so far: those not cancelled run."""
        for _, handle, callback, args in self.later:
            if not handle.cancelled():
                callback(*args)


@pytest.fixture
async def stepped_timers(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Timers]:
    loop = asyncio.get_running_loop()
    stepped = Timers(loop)
    monkeypatch.setattr(loop, "call_later", stepped.call_later)
    yield stepped
