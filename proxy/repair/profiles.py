"""What each provider additionally needs, on top of the universal rules (section 3.2 of the catalogue).

A profile is a named, ordered set of extra rules applied after the universal ones, plus a fast check
that says when none of them has anything to do.
"""

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    rules: tuple[ModuleType, ...] = ()
    is_clean: Callable[[list[Any]], bool] | None = None  # None: the profile adds no rules


PROFILES: dict[str, Profile] = {
    "openai": Profile("openai", "OpenAI and Azure OpenAI: the universal rules (S1-S13, E-ID-40, E-TOOL-IMG)"),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of: {', '.join(sorted(PROFILES))}") from None
