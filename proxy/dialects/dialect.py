"""The seam between the proxy and a wire protocol: what the one request path (``proxy/endpoint.py``) asks
of Chat Completions, the Responses API or Anthropic Messages.

A dialect owns everything that differs between them: the endpoint's path, how its request history is
checked and repaired (reading it into the engine's neutral view and writing the edits back into its own
JSON), how its answers are captured into remembered turns, which profiles it knows, and the shape of its
errors. The structural rules themselves are written once, over the neutral view (``proxy/repair/``).
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.responses import Response

from proxy.dialects import refusal
from proxy.dialects.capture import Capture
from proxy.errors import Render
from proxy.repair.cancel import Cancel
from proxy.repair.context import Recalled
from proxy.repair.engine import Result
from proxy.repair.findings import Finding, Policy
from proxy.repair.profiles import Profile
from proxy.repair.rules import orphan_tool_message
from proxy.turns import Dialect as DialectName
from proxy.turns import Turn, dialect_of


class Planned(Protocol):
    """A request that needs repair, and the call ids whose remembered turns the repair may need."""

    @property
    def recall(self) -> list[str]: ...

    def repair(self, recalled: Recalled, policy: Policy, cancel: Cancel | None = None) -> Result:
        """The repaired body, ready to encode (``Result.body``), with its findings; never re-checks. Ends with
        ``Cancelled`` once ``cancel`` is set (checked between rules)."""
        ...


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
    def history_key(self) -> str:
        """The body's history: ``messages``, or the Responses API's ``input``."""
        ...

    @property
    def capture(self) -> Capture: ...

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

    def plan(self, body: dict[str, Any], profile: Profile) -> Planned | None:
        """None when the body needs no repair (most requests: one fast check); else the plan."""
        ...

    def rejection(self, finding: Finding) -> Response:
        """The answer to a request the policy refuses to repair, naming the rule and the position."""
        ...

    def mend(self, body: bytes, error: orjson.JSONDecodeError) -> tuple[bytes, Counter[str]] | None:
        """A body the JSON parser refused, mended where the protocol has a known fix (Messages: lone surrogates,
        AM-21), with what was mended by rule code; None to refuse it as invalid JSON."""
        ...

    def retries(self, status: int, policy: Policy) -> bool:
        """Whether an upstream answer of this status may be a refusal ``retry`` knows a fix for, under ``policy``: only
        then is its error body read (bounded) before it is relayed."""
        ...

    def retry(self, status: int, error: bytes, sent: dict[str, Any], profile: Profile, policy: Policy) -> tuple[bytes, Counter[str]] | None:
        """The body to send once more, to the same upstream, after it refused ``sent`` (what went upstream, parsed) with
        ``status`` and the error body ``error`` (Messages: a thinking signature it would not take, AM-14; Responses:
        encrypted content it could not verify, RS-11), with what was
        changed by rule code; None to relay the refusal as the upstream sent it. Asked once per request."""
        ...


@dataclass(frozen=True, slots=True)
class RefusalFix:
    """A dialect's fix for one kind of upstream refusal (AM-14, RS-11), used under thinking policy ``drop``:
    whether an answer's status and error body are that refusal, and what was sent with what it cannot take left out
    (None: nothing to leave out)."""

    refused: Callable[[int, bytes], bool]
    retried: Callable[[dict[str, Any], Profile, Policy], Result | None]


class ListHistory:
    """What the dialects share: a history that is a list under ``history_key``, one endpoint, invalid JSON refused
    as sent, and upstream refusals relayed as sent unless the dialect names a ``refusal_fix`` (a dialect with a known
    fix for some invalid bodies overrides ``mend``)."""

    history_key: str
    path: str
    refusal_fix: RefusalFix | None = None
    #: Besides each entry's ``content`` list, the key of another list of it whose elements ``history_length`` counts
    #: (chat's ``tool_calls``), if any.
    also_counted: str | None = None
    history_entries: str

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def history_length(self, body: dict[str, Any], most: int) -> int:
        history = body.get(self.history_key)
        if type(history) is not list:
            return 0
        count, also = len(history), self.also_counted
        for entry in history:  # written out, one key at a time: it runs on the event loop, over every entry
            if count > most:
                break
            if type(entry) is dict:
                if type(content := entry.get("content")) is list:
                    count += len(content)
                if also is not None and type(more := entry.get(also)) is list:
                    count += len(more)
        return count

    def mend(self, body: bytes, error: orjson.JSONDecodeError) -> tuple[bytes, Counter[str]] | None:
        return None

    def retries(self, status: int, policy: Policy) -> bool:
        return self.refusal_fix is not None and status == refusal.STATUS and policy.thinking == "drop"

    def retry(self, status: int, error: bytes, sent: dict[str, Any], profile: Profile, policy: Policy) -> tuple[bytes, Counter[str]] | None:
        fix = self.refusal_fix
        if fix is None or not self.retries(status, policy) or not fix.refused(status, error):
            return None
        return _encoded(fix.retried(sent, profile, policy))


def _encoded(result: Result | None) -> tuple[bytes, Counter[str]] | None:
    """What ``Dialect.retry`` answers for the body a dialect's rules made of a refused request: that body encoded, with
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
