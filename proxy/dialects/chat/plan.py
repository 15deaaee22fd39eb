"""Planning and repairing a Chat Completions request: ``plan`` then ``Plan.repair``, and ``repair`` which is both.
Pure: no I/O, no framework, no globals.

The server plans first: most requests need nothing (``plan`` returns None after one fast check, ``check.py``, and
the client's bytes go upstream as sent); otherwise the plan names the call ids to recall, the server fetches
them from memory in one round trip, and hands the turns to ``Plan.repair``, which runs chat's pipeline
(``rules/__init__.py``) over the messages as they are (they are the engine's own view) and does not check again.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.dialects.chat.check import is_clean
from proxy.dialects.chat.profiles import get_profile
from proxy.dialects.chat.rules import PIPELINE, malformed_message
from proxy.repair.cancel import Cancel
from proxy.repair.context import Context, Recalled
from proxy.repair.engine import TOO_DEEP, Result, refused
from proxy.repair.findings import Finding, Policy
from proxy.repair.history import orphan_call_ids
from proxy.repair.profile import Profile
from proxy.turns import Turn

DEFAULT_POLICY = Policy()
NOTHING_RECALLED: Mapping[str, Turn] = {}


@dataclass(frozen=True, slots=True)
class Plan:
    """A chat-completions body that needs repair, and the call ids whose remembered turns it may need:
    orphan results, and what the profile's rules look up."""

    body: dict[str, Any]
    profile: Profile
    recall: list[str]

    def repair(self, recalled: Recalled = NOTHING_RECALLED, policy: Policy = DEFAULT_POLICY, cancel: Cancel | None = None) -> Result:
        """Run the rules over a copy of the body, with ``recalled`` (call id -> remembered turn) in hand; ``Cancelled``
        once ``cancel`` is set."""
        return run(self.body, recalled, self.profile, policy, cancel)


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
    """The fast check: False when the rules would find nothing (most requests)."""
    messages = body.get("messages") if type(body) is dict else None
    if type(messages) is not list:
        return False
    return not is_clean(messages, profile) or (bool(profile.rules) and not profile.is_clean(messages, body))


def plan(body: Any, profile: str | Profile = "openai") -> Plan | None:
    """None when ``body`` needs no repair; else the plan, with the call ids to recall first."""
    profile = get_profile(profile) if isinstance(profile, str) else profile
    if not needs_repair(body, profile):
        return None
    messages = body["messages"]
    ids: list[str] = []
    if all(type(m) is dict for m in messages):
        ids = list(dict.fromkeys([*orphan_call_ids(messages), *profile.wanted_ids(messages, body)]))
    return Plan(body, profile, ids)


def repair(body: Any, recalled: Recalled = NOTHING_RECALLED, profile: str | Profile = "openai",
           policy: Policy = DEFAULT_POLICY) -> Result:
    """Repair the tool-call history of a chat-completions request body: ``plan`` and ``Plan.repair`` in one.

    ``recalled`` maps call ids to the remembered turns that declared them (ids not remembered are simply
    absent). The input is never modified: when something needs repair the engine works on a copy.
    """
    planned = plan(body, profile)
    return Result(body, ()) if planned is None else planned.repair(recalled, policy)


def run(body: dict[str, Any], recalled: Recalled, profile: Profile, policy: Policy, cancel: Cancel | None = None) -> Result:
    repaired = {**body, "messages": [_copy_message(m) for m in body["messages"]]}
    ctx = Context(repaired["messages"], recalled, policy, profile, request=body)
    ctx.cancel = cancel
    try:
        if refused(ctx, PIPELINE.run("repair", profile.name)):
            return Result(body, tuple(ctx.findings), ctx.rejected)
    except orjson.JSONEncodeError:  # orjson reads 1,024 levels but writes only 255: a value too deep to re-encode
        finding = Finding(malformed_message.RULE.code, malformed_message.RULE.name, 0, "rejected", TOO_DEEP)
        return Result(body, (*ctx.findings, finding), finding)
    if not ctx.findings:
        return Result(body, ())
    return Result(repaired, tuple(ctx.findings))
