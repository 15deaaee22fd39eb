"""What a dialect gives the relay to remember an upstream's answers: one reader for JSON bodies, one for
event streams. Both return whole turns (``proxy.turns.Turn``) tagged with the dialect, never raise, and
keep what they can read of a broken answer.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from proxy.turns import Turn


class StreamReader(Protocol):
    """Reads one event stream as the relay passes its raw chunks on, in order.

    ``finished`` turns True once the stream's terminal event has been read (Chat's ``[DONE]``, Responses'
    ``response.completed``, Messages' ``message_stop``): the relay holds that chunk back until the turns are
    stored, so a client that answers the instant it reads the end finds its calls remembered. Past
    ``max_bytes`` the reader gives up, sets ``abandoned`` and returns no turns; the relay goes on."""

    abandoned: bool

    @property
    def finished(self) -> bool: ...

    def feed(self, chunk: bytes) -> None: ...

    def turns(self) -> list[Turn]: ...


class Capture(Protocol):
    def from_json(self, body: bytes) -> list[Turn]:
        """The turns of a complete JSON answer."""
        ...

    def stream(self, max_bytes: int | None) -> StreamReader:
        """A reader for one event-stream answer."""
        ...


@dataclass(frozen=True, slots=True)
class Readers:
    """A ``Capture`` made of a dialect's two readers: a function for JSON bodies, a reader class for streams."""

    json: Callable[[bytes], list[Turn]]
    events: Callable[[int | None], StreamReader]

    def from_json(self, body: bytes) -> list[Turn]:
        return self.json(body)

    def stream(self, max_bytes: int | None) -> StreamReader:
        return self.events(max_bytes)


@dataclass(frozen=True, slots=True)
class CaptureLimit:
    """How many bytes of one answer capture may read, and whom to tell when an answer is larger.

    ``gave_up`` is called once per such answer with why: ``"json"`` (a JSON answer) or ``"stream"``."""

    max_bytes: int
    gave_up: Callable[[str], None]
