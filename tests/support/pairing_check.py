"""``checked_pairings()``: while it is open, every pairing a repair context hands a rule (``Context.pairing``, kept
between rules until one reports a finding, or handed over by a dialect's view) is compared with a fresh walk of the
messages as they stand, so a rule that changes the messages without reporting it fails the test that ran it."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from proxy.repair.context import Context
from proxy.repair.history import Pairing


def fields(pairing: Pairing) -> tuple[Any, ...]:
    return pairing.turns, pairing.results, pairing.declares, pairing.repeated, pairing.tools


@contextmanager
def checked_pairings() -> Iterator[None]:
    kept = Context.pairing

    def pairing(self: Context) -> Pairing:
        handed = kept(self)
        assert fields(handed) == fields(Pairing(self.messages)), "a kept pairing no longer matches the messages"
        return handed

    with mock.patch.object(Context, "pairing", pairing):
        yield
