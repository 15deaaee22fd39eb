"""The seam between the proxy and a wire protocol: what the one request path (``proxy/endpoint.py``) asks
of Chat Completions, the Responses API or Anthropic Messages.

A dialect owns everything that differs between them: the endpoint's path, how its request history is
checked and repaired (reading it into the engine's neutral view and writing the edits back into its own
JSON), how its answers are captured into remembered turns, which profiles it knows, and the shape of its
errors. The structural rules themselves are written once, over the neutral view (``proxy/repair/``).
"""

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.responses import Response

from proxy.dialects import refusal
from proxy.dialects.capture import Capture
from proxy.dialects.refusal import Leaving, Refusal
from proxy.errors import Render
from proxy.repair.cancel import Cancel
from proxy.repair.context import Recalled
from proxy.repair.engine import Result
from proxy.repair.findings import Finding, Policy
from proxy.repair.pipeline import Pipeline
from proxy.repair.profile import Profile
from proxy.repair.rules import orphan_tool_message
from proxy.turns import Dialect as DialectName
from proxy.turns import Turn, dialect_of


@dataclass(frozen=True, slots=True)
class Facts:
    """What a dialect reads of a request beyond its body's history, for the request path and its own plan: the
    request ``target`` as sent (the raw path: Gemini names its model and whether it streams there), the ``model``
    its route and profile are chosen by, and whether the client asked for a stream (``streams``)."""

    target: bytes
    model: object
    streams: bool


class Planned(Protocol):
    """A request that needs repair, and the call ids whose remembered turns the repair may need."""

    @property
    def recall(self) -> list[str]: ...

    def repair(self, recalled: Recalled, policy: Policy, cancel: Cancel | None = None) -> Result:
        """The repaired body, ready to encode (``Result.body``), with its findings; never re-checks. Ends with
        ``Cancelled`` once ``cancel`` is set (checked between rules)."""
        ...


class MemoryLook:
    """A plan that may be no more than a look in memory (``broken`` False): the check found nothing to repair, only
    turns memory may hold in another form than the client sent (Messages: signed thinking the client may have
    altered, AM-13). With none of them recalled there is nothing to compare, and the endpoint runs no repair."""

    __slots__ = ()
    broken: bool


class Dialect(Protocol):
    # Read-only members (properties), so that a dialect may declare them with its own narrower types.
    @property
    def name(self) -> DialectName:
        """Tags the turns it remembers; memory is kept per tenant and dialect."""
        ...

    @property
    def path(self) -> str:
        """The endpoint below ``/v1`` whose requests it repairs (``/chat/completions``)."""
        ...

    @property
    def paths(self) -> tuple[str, ...]:
        """Every endpoint below ``/v1`` whose body carries the same history (``path`` first): Messages'
        ``count_tokens`` is repaired too, so it counts what will be sent and follows the same model route."""
        ...

    @property
    def path_pattern(self) -> "re.Pattern[str] | None":
        """Its endpoints when their paths carry facts of the request (Gemini's ``/v1beta/models/{model}:generateContent``):
        a pattern that matches the end of such a path (as decoded), at its start or right after a route prefix; None when
        ``paths`` name them all."""
        ...

    @property
    def api_pattern(self) -> "re.Pattern[str] | None":
        """The other paths of its API, when no ``/v1`` + ``path`` names them (Gemini's ``/v1beta/...``): they pass
        through, in its error shape; None when ``path`` does."""
        ...

    @property
    def history_key(self) -> str:
        """The body's history: ``messages``, or the Responses API's ``input``."""
        ...

    @property
    def capture(self) -> Capture: ...

    @property
    def pipeline(self) -> Pipeline:
        """Every rule its requests go through, by phase, in order (its ``rules/__init__.py``): what its plan runs and the
        registry (``proxy/registry.py``) lists."""
        ...

    @property
    def error(self) -> Render:
        """Its error shape: OpenAI's ``{"error": {...}}`` or Anthropic's ``{"type": "error", ...}``."""
        ...

    def profile(self, name: str) -> Profile:
        """The dialect's profile for a route's configured profile name (its default for a name it does not know)."""
        ...

    @property
    def history_entries(self) -> str:
        """What ``history_length`` counts, as an error names it (``messages and their content blocks``)."""
        ...

    def history_length(self, body: dict[str, Any], most: int) -> int:
        """How many entries the body's history holds, counting what the rules walk (``--max-messages`` bounds it):
        exact up to ``most``; past it, the count stops, so it costs work bounded by ``most`` whatever the body."""
        ...

    def facts(self, target: bytes, body: dict[str, Any]) -> Facts:
        """The request's ``Facts``, read off its target (the raw path as sent) and its parsed body."""
        ...

    def plan(self, body: dict[str, Any], profile: Profile, facts: Facts | None = None, policy: Policy | None = None) -> Planned | None:
        """None when the body needs no repair (most requests: one fast check); else the plan. ``facts``: what the
        request path read of the request beyond its body (None offline: ``toolmend check``); ``policy``: the operator's,
        for a repair that runs only when it opts in (None: the default policy, which opts into none)."""
        ...

    def rejection(self, finding: Finding) -> Response:
        """The answer to a request the policy refuses to repair, naming the rule and the position."""
        ...

    def mend(self, body: bytes, error: orjson.JSONDecodeError) -> tuple[bytes, Counter[str]] | None:
        """A body the JSON parser refused, mended where the protocol has a known fix (Messages: lone surrogates,
        AM-21), with what was mended by rule code; None to refuse it as invalid JSON."""
        ...

    def retries(self, status: int, policy: Policy) -> bool:
        """Whether an upstream answer of this status may be a refusal the dialect knows a fix for, under ``policy``: only
        then is its error body (bounded), or for status 200 a stream's first event, read before it is relayed."""
        ...

    def fix_for(self, refusal: Refusal, policy: Policy) -> "RefusalFix | None":
        """The fix for ``refusal`` (Messages: a thinking signature it would not take, AM-14; Responses: encrypted
        content it could not verify, RS-11, or an item it does not know, RS-8) under ``policy``; None to relay it."""
        ...

    def remembered_fix(self, policy: Policy) -> "RefusalFix | None":
        """The fix whose refused signatures or blobs are remembered, to be left out before a request is sent (under
        ``policy``); None when there is none."""
        ...


#: The status of a stream that may open with a refusal.
STREAMED = 200


@dataclass(frozen=True, slots=True)
class Blobs:
    """How the signed thinking or encrypted reasoning a refusal is about is found: in a request body (``carried``;
    None for a block or item that carries none), by which ids the remembered turns that may hold it are recalled
    (``recall_keys``), and in such a turn (``minted``)."""

    carried: Callable[[dict[str, Any]], list[Any]]
    recall_keys: Callable[[dict[str, Any]], list[str]]
    minted: Callable[[Turn], Iterable[Any]]


@dataclass(frozen=True, slots=True)
class RefusalFix:
    """A dialect's fix for one kind of upstream refusal (AM-14, RS-11, RS-8): whether a refusal is that one (of
    ``status``), what was sent with what it cannot take left out (None: nothing to leave out), and, for a refusal of
    signed thinking or encrypted reasoning, used under thinking policy ``drop`` only, how those are found (``blobs``)."""

    refused: Callable[[Refusal], bool]
    retried: Callable[[dict[str, Any], Profile, Policy, Leaving], Result | None]
    blobs: Blobs | None = None
    status: int = refusal.STATUS

    def applies(self, policy: Policy) -> bool:
        return self.blobs is None or policy.thinking == "drop"


class ListHistory:
    """What the dialects share: a history that is a list under ``history_key``, one endpoint, invalid JSON refused
    as sent, and upstream refusals relayed as sent unless the dialect names ``refusal_fixes`` (a dialect with a known
    fix for some invalid bodies overrides ``mend``)."""

    history_key: str
    path: str
    path_pattern: "re.Pattern[str] | None" = None
    api_pattern: "re.Pattern[str] | None" = None
    refusal_fixes: tuple[RefusalFix, ...] = ()
    #: Besides each entry's ``content`` list, the key of another list of it whose elements ``history_length`` counts
    #: (chat's ``tool_calls``), if any.
    also_counted: str | None = None
    #: The key of each entry's list that ``history_length`` counts the elements of (Gemini's ``parts``).
    entries_key = "content"
    history_entries: str

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def facts(self, target: bytes, body: dict[str, Any]) -> Facts:
        """The model and the stream flag as the body gives them (``model``, ``stream``)."""
        return Facts(target, body.get("model"), body.get("stream") is True)

    def history_length(self, body: dict[str, Any], most: int) -> int:
        history = body.get(self.history_key)
        if type(history) is not list:
            return 0
        count, also = len(history), self.also_counted
        for entry in history:  # written out, one key at a time: it runs on the event loop, over every entry
            if count > most:
                break
            if type(entry) is dict:
                if type(content := entry.get(self.entries_key)) is list:
                    count += len(content)
                if also is not None and type(more := entry.get(also)) is list:
                    count += len(more)
        return count

    def mend(self, body: bytes, error: orjson.JSONDecodeError) -> tuple[bytes, Counter[str]] | None:
        return None

    def retries(self, status: int, policy: Policy) -> bool:
        statuses = {fix.status for fix in self.refusal_fixes if fix.applies(policy)}
        # An answer of status 200 may be a stream whose first event is a refusal of status 400.
        return status in statuses or (status == STREAMED and refusal.STATUS in statuses)

    def fix_for(self, refusal: Refusal, policy: Policy) -> RefusalFix | None:
        return next((fix for fix in self.refusal_fixes if fix.applies(policy) and fix.refused(refusal)), None)

    def remembered_fix(self, policy: Policy) -> RefusalFix | None:
        return next((fix for fix in self.refusal_fixes if fix.blobs is not None and fix.applies(policy)), None)


def retry(fix: RefusalFix, sent: dict[str, Any], profile: Profile, policy: Policy, leaving: Leaving) -> tuple[bytes, Counter[str]] | None:
    """The body to send once more, to the same upstream, after it refused ``sent`` (what went upstream, parsed), or to
    send instead of ``sent`` when it carries what the upstream refused before: ``fix``'s, with what ``leaving`` says
    left out, encoded, with what was changed by rule code; None to relay the refusal (or send ``sent``) as it is."""
    return _encoded(fix.retried(sent, profile, policy, leaving))


def _encoded(result: Result | None) -> tuple[bytes, Counter[str]] | None:
    """What ``retry`` answers for the body a dialect's rules made of a refused request: that body encoded, with
    what was changed by rule code; None when there is none, or when it nests too deep to encode again (the refusal then
    goes to the client)."""
    if result is None:
        return None
    try:
        body = orjson.dumps(result.body)
    except orjson.JSONEncodeError:
        return None
    return body, Counter(finding.code for finding in result.findings)


def viewed(recalled: Recalled, dialect: DialectName, view_turn: Callable[[Turn], Turn]) -> dict[str, Turn]:
    """The recalled turns of ``dialect`` as the structural rules read them (``view_turn``), by the same keys. A turn
    recalled by several of its ids (a parallel turn) is viewed once and shared, as the store shares it."""
    views: dict[int, Turn] = {}
    out: dict[str, Turn] = {}
    for key, turn in recalled.items():
        if dialect_of(turn) == dialect:
            made = views.get(id(turn))
            if made is None:
                made = views[id(turn)] = view_turn(turn)
            out[key] = made
    return out


def rejection(finding: Finding, render: Render, where: str, param: str | None) -> Response:
    """A refused repair in ``render``'s shape: the rule, the position as the client wrote it (``where``), and why."""
    why = " under the configured orphan policy (--orphan-policy)" if finding.code == orphan_tool_message.RULE.code else ""
    return render(400, f"toolmend {finding.code} ({finding.name}) at {where}: {finding.detail}. The history cannot be repaired{why}.",
                  param=param, code=f"toolmend_{finding.name.replace('-', '_')}")
