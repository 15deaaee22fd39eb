"""Time a test moves on itself, so it never waits for time to pass.

``stepped_timers``: the running loop's ``call_later`` timers (and so ``asyncio.sleep``) are recorded and run when the
test ``fire``s them; ``asyncio.timeout`` uses ``call_at`` and is left to the real clock, so a hang guard still fires.
``stepped_clock``: the loop's clock itself is put ahead by hand, and every timer due by then runs.

Both are fixtures: a test module that uses one imports it by name."""

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


class SteppedClock:
    """The running loop's clock, moved on by hand: ``advance`` puts it ``seconds`` ahead and returns once every timer
    due by then (``call_at``, ``asyncio.timeout``) has run."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.real, self.ahead = loop, loop.time, 0.0

    def time(self) -> float:
        return self.real() + self.ahead

    async def advance(self, seconds: float) -> None:
        self.ahead += seconds
        passed = asyncio.Event()
        self.loop.call_at(self.loop.time(), passed.set)  # after the timers due before it: they are run in time order
        await passed.wait()


@pytest.fixture
async def stepped_clock(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SteppedClock]:
    loop = asyncio.get_running_loop()
    clock = SteppedClock(loop)
    monkeypatch.setattr(loop, "time", clock.time)
    yield clock
