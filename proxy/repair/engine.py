"""``repair``: the one entry point of the engine. Pure: no I/O, no framework, no globals."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.repair.clean import is_clean
from proxy.repair.context import Context, Recall
from proxy.repair.findings import Finding, Policy
from proxy.repair.profiles import Profile, get_profile
from proxy.repair.rules import UNIVERSAL
from proxy.turns import Turn

DEFAULT_POLICY = Policy()


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


def nothing_recalled(ids: list[str]) -> Mapping[str, Turn]:
    return {}


def needs_repair(body: Any, profile: Profile) -> bool:
    """The fast path: False when ``repair`` would find nothing (most requests)."""
    messages = body.get("messages") if type(body) is dict else None
    return type(messages) is list and not (is_clean(messages) and profile.is_clean(messages))


def repair(
    body: Any,
    recall: Recall = nothing_recalled,
    profile: str | Profile = "openai",
    policy: Policy = DEFAULT_POLICY,
) -> Result:
    """Repair the tool-call history of a chat-completions request body.

    ``recall(ids)`` returns the remembered turns for the given call ids (a mapping from call id to the
    turn that declared it; missing ids are simply absent). The input is never modified: when something
    needs repair the engine works on a copy.
    """
    profile = get_profile(profile) if isinstance(profile, str) else profile
    if not needs_repair(body, profile):
        return Result(body, ())
    repaired = orjson.loads(orjson.dumps(body))
    ctx = Context(repaired["messages"], repaired.get("tools"), recall, policy)
    for rule in (*UNIVERSAL, *profile.rules):
        rule.apply(ctx)
        if ctx.rejected is not None:
            return Result(body, tuple(ctx.findings), ctx.rejected)
    if not ctx.findings:
        return Result(body, ())
    return Result(repaired, tuple(ctx.findings))
