"""A dialect's pipeline as data: its rules in the order they run, each in a phase, for every profile or named ones.

Each dialect declares one ``PIPELINE`` in its ``rules/__init__.py``, so that file alone answers "which rules run for
this endpoint, in what order". The dialect's plan runs a phase through it (``run``), its profile table takes each
profile's own rules from it (``profile_rules``), and the registry (``proxy/registry.py``) reads every dialect's to
list every rule once, by code.
"""

from dataclasses import dataclass, field
from typing import cast

from proxy.repair.profile import ProfileRule
from proxy.repair.rule import Described, RepairRule


@dataclass(frozen=True)
class Step:
    """One rule of a phase, run for every profile or, when ``profiles`` names some, for those only."""

    rule: Described
    profiles: tuple[str, ...] = ()

    def runs_for(self, profile: str) -> bool:
        return not self.profiles or profile in self.profiles


@dataclass(frozen=True)
class Phase:
    """A named run of steps: ``runs`` says over what and when, in a line. A phase whose rules are no ``RepairRule``
    (``applied=False``: Messages' lone surrogates, mended in the raw bytes) is listed and never ``run``. The dialect's
    fast check knows every rule of a ``checked`` phase (a test holds it to that); the others run on what the fast check
    never sees: raw bytes, or what was sent when the upstream refused it."""

    name: str
    runs: str
    steps: tuple[Step | Described, ...]
    applied: bool = True
    checked: bool = True

    @property
    def scoped(self) -> tuple[Step, ...]:
        """The steps, a bare rule being a step for every profile."""
        return tuple(step if isinstance(step, Step) else Step(step) for step in self.steps)


@dataclass(frozen=True)
class Pipeline:
    dialect: str
    phases: tuple[Phase, ...]
    #: ``run``'s answers, by phase and profile: a repair asks for each phase once.
    _runs: dict[tuple[str, str], tuple[RepairRule, ...]] = field(default_factory=dict, compare=False, repr=False)

    def phase(self, name: str) -> Phase:
        return next(phase for phase in self.phases if phase.name == name)

    def run(self, phase: str, profile: str) -> tuple[RepairRule, ...]:
        """The rules ``phase`` applies for ``profile``, in order (computed once per phase and profile)."""
        rules = self._runs.get((phase, profile))
        if rules is None:
            rules = self._runs[phase, profile] = self._applied(phase, profile)
        return rules

    def _applied(self, name: str, profile: str) -> tuple[RepairRule, ...]:
        phase = self.phase(name)
        if not phase.applied:
            raise ValueError(f"{self.dialect}'s phase {name!r} is not applied by the engine")
        # An applied phase holds rule modules with ``apply`` (a test walks the registry for it).
        return tuple(cast(RepairRule, step.rule) for step in phase.scoped if step.runs_for(profile))

    def profile_rules(self, profile: str) -> tuple[ProfileRule, ...]:
        """The rules the pipeline runs for ``profile`` alone (those that name it), in order: a profile's own."""
        # The steps that name profiles are profile rules (a test walks the registry for their ``is_clean``).
        return tuple(cast(ProfileRule, step.rule) for phase in self.phases for step in phase.scoped if profile in step.profiles)
