"""Planning and repairing a Responses request: the structural rules over the view, then the item rules.

``plan`` runs the one-pass check; ``ResponsesPlan.repair`` drops what the previous response already holds
(TM401), reads the rest of the input into the neutral view (``view.py``), runs the structural rules every
dialect shares with the remembered turns in hand, writes the view back into items, runs the other Responses
rules over those items, and answers with the request body holding the new input. Every finding names the
position of the item as the client sent it.

``retried`` answers the upstream rather than the client: when it could not verify the encrypted content of some
reasoning (RS-11), what was sent goes through the ``retry`` phase (TM408, TM405, TM406) to be sent once more; its
findings name positions in that body. ``retried_unknown`` does the same with ``retry-unknown`` (TM409 first) for an item id it did not know
(RS-8).
"""

from dataclasses import dataclass
from functools import partial
from typing import Any

from proxy.dialects.dialect import viewed
from proxy.dialects.refusal import EVERY, Leaving, Refusing
from proxy.dialects.responses.check import inspect
from proxy.dialects.responses.items import call_id_of, is_call, is_output
from proxy.dialects.responses.rules import PIPELINE, refused_reasoning
from proxy.dialects.responses.rules.previous import previous_id
from proxy.dialects.responses.view import is_reasoning, marks, read, view_turn, write
from proxy.repair.cancel import Cancel
from proxy.repair.context import Context, Recalled
from proxy.repair.engine import Result, refused
from proxy.repair.findings import Policy
from proxy.repair.profile import Profile


@dataclass(frozen=True, slots=True)
class ResponsesPlan:
    body: dict[str, Any]
    profile: Profile
    recall: list[str]

    def repair(self, recalled: Recalled, policy: Policy, cancel: Cancel | None = None) -> Result:
        resent = Context(list(self.body["input"]), recalled, policy, self.profile, request=self.body)
        refused(resent, PIPELINE.run("resent", self.profile.name))  # TM401 refuses nothing
        items = resent.messages
        view, origin = read(items, self._held_by_server(items, recalled), self.profile.adjacent_results)
        # The structural rules read remembered turns as they read the history: as the view.
        held = frozenset(mark for item in items if is_reasoning(item) for mark in marks(item))
        remembered = viewed(recalled, "responses", partial(view_turn, held=held))
        ctx = Context(view, remembered, policy, self.profile, _as_sent(origin, items, resent), self.body)
        ctx.findings, ctx.cancel = resent.findings, cancel
        if refused(ctx, PIPELINE.run("view", self.profile.name)):
            return Result(self.body, tuple(ctx.findings), ctx.rejected)
        ctx.messages, ctx.recalled = write(ctx.messages, ctx.origin), recalled
        if refused(ctx, PIPELINE.run("items", self.profile.name)):
            return Result(self.body, tuple(ctx.findings), ctx.rejected)
        if not ctx.findings:
            return Result(self.body, ())
        return Result({**self.body, "input": ctx.messages}, tuple(ctx.findings))

    def _held_by_server(self, items: list[Any], recalled: Recalled) -> frozenset[str]:
        """Outputs that answer calls only the server holds, in a ``previous_response_id`` request: calls of the
        remembered previous response, or of any response when it is not remembered, that the input lacks."""
        chained = previous_id(self.body)
        if chained is None:
            return frozenset()
        declared = {call_id_of(item) for item in items if is_call(item)}
        previous = recalled.get(chained)
        held = items if previous is None else previous.get("items", ())
        answering = (call_id_of(item) for item in held if (is_output(item) if previous is None else is_call(item)))
        return frozenset(cid for cid in answering if cid is not None and cid not in declared)


def _as_sent(origin: dict[int, int], items: list[Any], resent: Context) -> dict[int, int]:
    """``origin`` (positions in ``items``, what TM401 left) as positions in the input the client sent."""
    sent = [resent.index_of(item) for item in items]
    return {key: sent[index] for key, index in origin.items()}


def retried(body: dict[str, Any], profile: Profile, policy: Policy, leaving: Leaving = EVERY) -> Result | None:
    """The body to send once more after the upstream could not verify encrypted content in ``body`` (what was sent:
    the repaired body, or the client's), with what ``leaving`` says left out (every such reasoning, or some), and the
    findings; None when there was no reasoning with encrypted content to remove, or under thinking policy ``reject``
    (the refusal then goes to the client)."""
    if policy.thinking != "drop":
        return None
    # TM408 removes every reasoning item that carries encrypted content, TM405 deletes the server id of each item whose
    # reasoning that removed (the input as sent says which, ``refused_reasoning.made_with``), TM406 drops reasoning left
    # with nothing it produced (a safety net: the request was checked for that before it was sent).
    return _retried(body, profile, policy, leaving, "retry")


def retried_unknown(body: dict[str, Any], profile: Profile, policy: Policy, leaving: Leaving) -> Result | None:
    """The body to send once more after the upstream did not know an item id of ``body`` (``leaving.refusal`` names
    it), with the findings; None when no item has that id."""
    return _retried(body, profile, policy, leaving, "retry-unknown")  # TM409 drops that item or its id, then TM405, TM406


def _retried(body: dict[str, Any], profile: Profile, policy: Policy, leaving: Leaving, phase: str) -> Result | None:
    """``body`` through the pipeline's ``phase`` (its first rule answering the refusal), when that rule changed something."""
    rules = PIPELINE.run(phase, profile.name)
    items = body.get("input")
    if type(items) is not list:
        return None
    ctx = Refusing(list(items), refused_reasoning.made_with(items), policy, profile, request=body)
    ctx.leaving = leaving
    if refused(ctx, rules) or not any(finding.code == rules[0].RULE.code for finding in ctx.findings):
        return None
    return Result({**body, "input": ctx.messages}, tuple(ctx.findings))


def plan(body: dict[str, Any], profile: Profile) -> ResponsesPlan | None:
    found = inspect(body, profile)
    if found is None:
        return None
    return ResponsesPlan(body, profile, list(dict.fromkeys([*found.wanted, *(found.reasoned if found.broken else ())])))
