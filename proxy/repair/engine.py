"""What every dialect's repair shares: the ``Result`` of a pass and ``refused``, which applies rules in order. Pure:
no I/O, no framework, no globals.

Each dialect plans first (``Dialect.plan``: None after one fast check for most requests, whose bytes go upstream as
sent); a plan names the call ids to recall, the server fetches them from memory in one round trip and hands the
turns to the plan's ``repair``, which runs the dialect's pipeline (its ``rules/__init__.py``) through ``refused``.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from proxy.repair.context import Context
from proxy.repair.findings import Finding
from proxy.repair.rule import RepairRule

TOO_DEEP = "the request nests values deeper than can be encoded again (255 levels); nothing was repaired"


@dataclass(frozen=True, slots=True)
class Result:
    """The repaired body and what was found. When ``findings`` is empty, ``body`` is the very object that
    was passed in, untouched, so the caller can forward the client's original bytes."""

    body: Any
    findings: tuple[Finding, ...]
    rejected: Finding | None = None

    @property
    def changed(self) -> bool:
        return bool(self.findings) and self.rejected is None


def refused(ctx: Context, rules: Iterable[RepairRule]) -> bool:
    """Apply ``rules`` in order; True as soon as one refuses the request (``ctx.rejected``), the rest not run.
    ``Cancelled`` before a rule once ``ctx.cancel`` is set."""
    cancel = ctx.cancel
    for rule in rules:
        if cancel is not None:
            cancel.check()
        rule.apply(ctx)
        if ctx.rejected is not None:
            return True
    return False
