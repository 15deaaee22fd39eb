"""What a repair rule is: a stable identity (``Rule``: code, name, the provider rules it answers) and the module
that carries it. A rule is a module (one rule per file, with a Bad/Good docstring); these protocols are
the shape every such module has, checked by mypy where the rule lists are built."""

from typing import Protocol

from proxy.repair.context import Context
from proxy.repair.findings import Rule

__all__ = ["Described", "RepairRule", "Rule"]


class Described(Protocol):
    """A module that carries a rule's identity and its Bad/Good docstring (the catalogue reads it)."""

    RULE: Rule


class RepairRule(Described, Protocol):
    """A rule module: ``RULE`` and ``apply``, which finds the problem in ``ctx`` and fixes or refuses it."""

    def apply(self, ctx: Context) -> None: ...
