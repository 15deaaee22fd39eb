"""Every rule, once, by code: which dialects run it, in which phase, for which profiles. Assembled from each dialect's
pipeline (``Dialect.pipeline``, declared in its ``rules/__init__.py``) over the dialect list, so a dialect that
declares its pipeline is in it. The rule list (``toolmend check --list-rules``), the README's rule tables (by test) and
the catalogue's examples read it.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from proxy.dialects import DIALECTS
from proxy.repair.catalog import RuleDoc, describe
from proxy.repair.pipeline import Pipeline
from proxy.repair.rule import Described


@dataclass(frozen=True)
class Use:
    """Where a rule runs: a dialect's phase, for every profile (``profiles`` empty) or the named ones."""

    dialect: str
    phase: str
    profiles: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    code: str
    rule: Described
    #: The dialect whose package holds the rule, or ``shared`` for ``proxy/repair/rules/`` (every dialect's).
    home: str
    uses: tuple[Use, ...]

    @property
    def dialects(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(use.dialect for use in self.uses))

    @property
    def profiles(self) -> tuple[str, ...]:
        """The profiles that run it, when every use names some; empty: it runs for every profile."""
        if any(not use.profiles for use in self.uses):
            return ()
        return tuple(dict.fromkeys(name for use in self.uses for name in use.profiles))

    def doc(self) -> RuleDoc:
        return describe(self.rule, self.profiles)


SHARED = "shared"
#: The homes of the rules written over chat's shape, whose Bad/Good examples are chat histories: the shared ones and chat's.
CHAT_HOMES = (SHARED, "chat")


def home_of(rule: Described) -> str:
    """``proxy.dialects.<dialect>....`` is that dialect's rule; anything else (``proxy.repair.rules``) is shared."""
    parts = getattr(rule, "__name__", "").split(".")
    return parts[2] if parts[:2] == ["proxy", "dialects"] and len(parts) > 2 else SHARED


class DuplicateCode(ValueError):
    """Two different rules declare one code."""


@cache
def entries() -> tuple[Entry, ...]:
    """Every rule of every dialect's pipeline, once, in the order the dialects and their phases list them."""
    return assemble(tuple(dialect.pipeline for dialect in DIALECTS))


def assemble(pipelines: Iterable[Pipeline]) -> tuple[Entry, ...]:
    """The rules of ``pipelines`` by code, each with every use; ``DuplicateCode`` when two rules declare one code."""
    rules: dict[str, Described] = {}
    uses: dict[str, list[Use]] = {}
    for pipeline in pipelines:
        for phase in pipeline.phases:
            for step in phase.scoped:
                code = step.rule.RULE.code
                if rules.setdefault(code, step.rule) is not step.rule:
                    raise DuplicateCode(f"{code} is declared by {getattr(rules[code], '__name__', '?')} and {getattr(step.rule, '__name__', '?')}")
                uses.setdefault(code, []).append(Use(pipeline.dialect, phase.name, step.profiles))
    return tuple(Entry(code, rule, home_of(rule), tuple(uses[code])) for code, rule in rules.items())


def rule_docs(dialect: str, homes: tuple[str, ...] | None = None, phases: tuple[str, ...] | None = None) -> list[RuleDoc]:
    """The catalogue of the rules ``dialect`` runs (those whose home is in ``homes``, in one of ``phases``, when given),
    each with its profiles as that dialect names them."""
    docs = []
    for entry in entries():
        mine = tuple(use for use in entry.uses if use.dialect == dialect and (phases is None or use.phase in phases))
        if mine and (homes is None or entry.home in homes):
            docs.append(Entry(entry.code, entry.rule, entry.home, mine).doc())
    return docs
