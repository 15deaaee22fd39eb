"""The identity every repair rule carries: a stable code, a name, and the provider rules it answers."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    answers: tuple[str, ...]
