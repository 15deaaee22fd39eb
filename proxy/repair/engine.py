"""``repair``: the one entry point of the engine. Pure: no I/O, no framework, no globals."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.repair.clean import is_clean
from proxy.repair.context import Context, Recall
from proxy.repair.findings import Finding, Policy
from proxy.repair.history import orphan_call_ids
from proxy.repair.profiles import Profile, get_profile
from proxy.repair.rules import FINAL, UNIVERSAL, malformed_message
from proxy.turns import Turn

DEFAULT_POLICY = Policy()
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


def nothing_recalled(ids: list[str]) -> Mapping[str, Turn]:
    return {}


def _copy_message(message: Any) -> Any:
    """Copy what the rules may change in place (the message, its call list, calls and their functions);
    content and other values are only ever replaced, never mutated, so they are shared."""
    if type(message) is not dict:
        return message
    copied = dict(message)
    calls = copied.get("tool_calls")
    if type(calls) is list:
        copied["tool_calls"] = [_copy_call(call) for call in calls]
    if type(copied.get("function_call")) is dict:
        copied["function_call"] = dict(copied["function_call"])
    return copied


def _copy_call(call: Any) -> Any:
    if type(call) is not dict:
        return call
    copied = dict(call)
    if type(copied.get("function")) is dict:
        copied["function"] = dict(copied["function"])
    return copied


def needs_repair(body: Any, profile: Profile) -> bool:
    """The fast path: False when ``repair`` would find nothing (most requests)."""
    messages = body.get("messages") if type(body) is dict else None
    if type(messages) is not list:
        return False
    return not is_clean(messages) or (bool(profile.rules) and not profile.is_clean(messages))


def recall_ids(body: Any, profile: Profile) -> list[str]:
    """The call ids whose remembered turns a repair of ``body`` may need: orphan results, and what the
    profile's rules look up. The server fetches them in one round trip before calling ``repair``."""
    messages = body.get("messages") if type(body) is dict else None
    if type(messages) is not list or not all(type(m) is dict for m in messages):
        return []
    return list(dict.fromkeys([*orphan_call_ids(messages), *profile.wanted_ids(messages)]))


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
    repaired = {**body, "messages": [_copy_message(m) for m in body["messages"]]}
    ctx = Context(repaired["messages"], repaired.get("tools"), recall, policy, profile)
    try:
        for rule in (*UNIVERSAL, *profile.rules, *FINAL):
            rule.apply(ctx)
            if ctx.rejected is not None:
                return Result(body, tuple(ctx.findings), ctx.rejected)
    except orjson.JSONEncodeError:  # orjson reads 1,024 levels but writes only 255: a value too deep to re-encode
        finding = Finding(malformed_message.RULE.code, malformed_message.RULE.name, 0, "rejected", TOO_DEEP)
        return Result(body, (*ctx.findings, finding), finding)
    if not ctx.findings:
        return Result(body, ())
    return Result(repaired, tuple(ctx.findings))
