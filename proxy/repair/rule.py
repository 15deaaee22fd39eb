"""What a repair rule is: a stable identity (code, name, the provider rules it answers) and the module
that carries it. A rule is a module (one rule per file, with a Bad/Good docstring); these protocols are
the shape every such module has, checked by mypy where the rule lists are built."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from proxy.repair.context import Context
    from proxy.repair.profiles import Profile


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    answers: tuple[str, ...]


class Described(Protocol):
    """A module that carries a rule's identity and its Bad/Good docstring (the catalogue reads it)."""

    RULE: Rule


class RepairRule(Described, Protocol):
    """A rule module: ``RULE`` and ``apply``, which finds the problem in ``ctx`` and fixes or refuses it."""

    def apply(self, ctx: Context) -> None: ...


class ProfileRule(RepairRule, Protocol):
    """A rule a profile adds. The universal fast check does not know it, so it says itself when it has
    nothing to do."""

    def is_clean(self, messages: list[Any], profile: Profile) -> bool: ...


@runtime_checkable
class RecallingRule(Protocol):
    """A profile rule that consults memory for calls that are present (not only for orphans): it names the
    call ids to recall before the repair runs."""

    def wanted_ids(self, messages: Sequence[Any]) -> list[str]: ...


@runtime_checkable
class GatedRule(Protocol):
    """A profile rule that concerns some requests only (by a setting of the body or its model): for the others the
    fast check leaves it out and it changes nothing."""

    def applies(self, request: Mapping[str, Any]) -> bool: ...
