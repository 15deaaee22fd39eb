"""What a profile is: a named, ordered set of rules a dialect runs for one kind of provider, on top of the rules it
runs for every provider, and what that provider takes (where results may stand, how long an id may be, its closed
schema). Each dialect keeps its own table of profiles; this module is only the type, so any rule or dialect can name
it without importing a table (and the rules a table names)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from proxy.repair.findings import Rule


class ProfileRule(Protocol):
    """A rule a profile adds. The dialect's fast check does not know it, so it says itself when it has nothing to do.
    (``apply`` takes the repair's ``Context``, a ``RepairRule``; the context names this type, so it is not named here.)"""

    RULE: Rule

    def apply(self, ctx: Any) -> None: ...

    def is_clean(self, messages: list[Any], profile: "Profile") -> bool: ...


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


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    rules: tuple[ProfileRule, ...] = ()
    #: For closed-schema providers: role (or ``tool_call``, ``function``) -> the keys they accept.
    schema: Mapping[str, frozenset[str]] | None = None
    #: Upstream hosts (``host`` or ``host:port``) that select this profile.
    hosts: tuple[str, ...] = ()
    #: Model names (lower-case shell patterns) that select it for a request to an upstream whose host selects none.
    models: tuple[str, ...] = ()
    #: Results must follow their call directly (Chat Completions, Anthropic, DeepSeek's and Kimi's Responses:
    #: RS-17, RS-18). When False (OpenAI's Responses API), a result may stand anywhere after its call, and
    #: only results before their call are moved.
    adjacent_results: bool = True
    #: The longest call id the provider accepts (E-ID-40; the Responses API allows 64, RS-14).
    max_id_length: int = 40
    #: Tool message content must be a plain string: the provider refuses an array of text parts, which OpenAI takes
    #: (GR-2, MI-9: Groq, Mistral, vLLM). TM205 joins the parts for these profiles only.
    string_tool_content: bool = False

    def is_clean(self, messages: list[Any], request: Mapping[str, Any]) -> bool:
        """True when none of the profile's rules that concern ``request`` has anything to do (the dialect's check ran first)."""
        return all(rule.is_clean(messages, self) for rule in self.concerning(request))

    def wanted_ids(self, messages: list[Any], request: Mapping[str, Any]) -> list[str]:
        """Call ids whose remembered turns the profile's rules will look up for ``request``."""
        return [cid for rule in self.concerning(request) if isinstance(rule, RecallingRule) for cid in rule.wanted_ids(messages)]

    def concerning(self, request: Mapping[str, Any]) -> list[ProfileRule]:
        """The profile's rules that concern ``request``: all but the gated ones that say they do not."""
        return [rule for rule in self.rules if not isinstance(rule, GatedRule) or rule.applies(request)]
