"""The working state one repair pass shares between the rules."""

import hashlib
from collections.abc import Mapping
from typing import Any

from proxy.repair.cancel import Cancel
from proxy.repair.findings import DETAIL_CHARS, CallSource, Finding, Policy, Rule, bounded
from proxy.repair.history import Message, Pairing
from proxy.repair.profile import Profile
from proxy.turns import Turn

#: The remembered turns a repair was handed: call id -> the turn that declared it (ids not found are absent).
Recalled = Mapping[str, Turn]


class Context:
    """The message list being repaired, the findings so far, and what the rules may consult: the
    request's tools, the turns recalled from memory before the repair began, the policy and the profile.

    Rules mutate ``messages`` in place. ``origin`` maps each message object of the request (by identity)
    to its index as the client sent it, so findings point at the client's numbering even after earlier
    rules inserted or moved messages. ``cancel``, when a plan sets it, gives the pass up between rules.
    """

    cancel: Cancel | None = None
    _pairing: tuple[list[Message], int, Pairing] | None = None  # (the list walked, the findings then, its pairing)

    def __init__(self, messages: list[Message], recalled: Recalled, policy: Policy, profile: Profile,
                 origin: dict[int, int] | None = None, request: Mapping[str, Any] | None = None) -> None:
        self.messages = messages
        self.profile = profile
        self.recalled = recalled
        self.policy = policy
        self.findings: list[Finding] = []
        self.rejected: Finding | None = None
        # A dialect that reads its history into a view passes where each entry stood in the client's JSON.
        self.origin = origin if origin is not None else {id(message): index for index, message in enumerate(messages)}
        # ``origin`` is keyed by identity: every entry it knows stays alive for the pass, so a message a rule makes
        # after deleting one can never take a deleted message's id, and with it a wrong position in its finding.
        self._alive = list(messages)
        #: The whole request body as the client sent it (read-only): settings such as ``store`` or ``thinking``.
        self.request: Mapping[str, Any] = request if request is not None else {}
        #: The request's tools, as it declares them (read-only).
        self.tools: Any = self.request.get("tools")

    def pairing(self) -> Pairing:
        """Where the calls and results of ``messages`` stand, walked once for the rules that follow one another
        without changing it: a rule that changes the messages reports it, so the walk is kept until a finding is
        added (or ``messages`` is another list)."""
        kept = self._pairing
        if kept is None or kept[0] is not self.messages or kept[1] != len(self.findings):
            kept = self._pairing = (self.messages, len(self.findings), Pairing(self.messages))
        return kept[2]

    def paired(self, pairing: Pairing) -> None:
        """Take ``pairing`` as where the calls and results of ``messages`` stand: a dialect's view, which walks the
        history as it reads it, hands it over, so that the first rule that asks does not walk it again."""
        self._pairing = (self.messages, len(self.findings), pairing)

    def index_of(self, message: Any, fallback: int = 0) -> int:
        return self.origin.get(id(message), fallback)

    def made_for(self, message: Any, made: Message) -> Message:
        """``made``, a message a rule made to stand for ``message`` (a turn restored before its result): findings on
        it name ``message``'s position, not where it stands in a list the rules are changing."""
        self.origin[id(made)] = self.index_of(message)
        self._alive.append(made)
        return made

    def report(self, rule: Rule, message: Any, action: str, detail: str, position: int = 0,
               put_back: tuple[CallSource, int] | None = None) -> None:
        """Note a finding (its detail ``bounded``); a rule that put tool calls back into the history says how many
        and whence (``put_back``: their source and count)."""
        source, calls = put_back if put_back is not None else (None, 0)
        # ``index_of`` and ``bounded``, inlined: a repair of a long history reports hundreds of findings.
        index = self.origin.get(id(message), position)
        if len(detail) > DETAIL_CHARS:
            detail = bounded(detail)
        self.findings.append(Finding(rule.code, rule.name, index, action, detail, source, calls))

    def reject(self, rule: Rule, message: Any, detail: str, position: int = 0) -> None:
        self.report(rule, message, "rejected", detail, position)
        self.rejected = self.findings[-1]

    def tool_names(self) -> list[str]:
        """Names of the function tools the request declares, in order."""
        names = []
        if type(self.tools) is list:
            for tool in self.tools:
                function = tool.get("function") if type(tool) is dict else None
                if type(function) is dict and type(function.get("name")) is str:
                    names.append(function["name"])
        return names


def stable_id(*parts: object, prefix: str = "call_") -> str:
    """A short deterministic call id: the same history always gets the same id, so repairs are idempotent
    and a client that replays a repaired history sends the same ids again."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()
    return prefix + digest[:24]
