"""Giving up a repair whose client has gone.

A large body is repaired in a thread (``proxy/endpoint.py``), which nothing can stop from outside. The endpoint
hands the engine a ``Cancel`` and sets it when the client disconnects; the engine checks it before each rule
(``engine.refused``) and ends with ``Cancelled``, so the thread ends within one rule of the client leaving, and
every rule is linear in the body.
"""

import threading


class Cancelled(Exception):
    """The repair was given up: it was cancelled while it ran."""


class Cancel:
    """Set once, from any thread; checked by the engine."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = threading.Event()

    def set(self) -> None:
        self._set.set()

    def check(self) -> None:
        """Raise ``Cancelled`` once set."""
        if self._set.is_set():
            raise Cancelled
