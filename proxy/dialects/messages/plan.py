"""Planning and repairing a Messages request: the structural rules over the view, then the Messages rules.

``plan`` runs the one-pass check; ``MessagesPlan.repair`` reads the messages into the neutral view (``view.py``),
runs the structural rules every dialect shares (and TM501) with the remembered turns in hand, writes the view
back into messages, runs the Messages rules over them (``rules/``, the profile's among them), and answers with
the request body holding the new messages, without ``thinking`` when a rule turned it off for this request
(TM510, policy ``drop``). The phases and their order are ``rules/__init__.py``'s. Every finding names the position of the message as the client sent it.

The Messages rules that edit one message at a time visit only the pending messages (``rules/edit.py``): the
client's own that the check marked, and those the view rebuilt that ``check.may_change`` flags; a long history
whose repair touches a few hundred messages is not walked once per rule.

``retried`` answers the upstream rather than the client: when it refused a thinking signature (AM-14), what was
sent goes through the ``retry`` phase (TM513, TM510) to be sent once more; its findings name positions in that body.
"""

from dataclasses import dataclass
from typing import Any

from proxy.dialects.dialect import MemoryLook, viewed
from proxy.dialects.messages.check import inspect, may_change
from proxy.dialects.messages.rules import PIPELINE, altered_thinking, refused_signature, system_message, thinking, unsigned_thinking
from proxy.dialects.messages.rules.edit import Pending
from proxy.dialects.messages.view import View, read, view_turn, write
from proxy.dialects.refusal import EVERY, Leaving, Refusing
from proxy.repair.cancel import Cancel
from proxy.repair.context import Recalled
from proxy.repair.engine import Result, refused
from proxy.repair.findings import Policy
from proxy.repair.profile import Profile
from proxy.turns import dialect_of


@dataclass(slots=True)  # not frozen: made for every request with signed thinking, and a frozen one is slower to make
class MessagesPlan(MemoryLook):
    body: dict[str, Any]
    profile: Profile
    recall: list[str]
    #: The positions of the client's messages the check found a Messages rule may change (None: not known, so
    #: those rules walk every message).
    marked: frozenset[int] | None = None
    #: Whether the check found something to repair; when not, the plan is only a look in memory for thinking the
    #: client may have altered (AM-13), and a history memory agrees with is not read at all (with nothing recalled,
    #: the endpoint does not ask for the repair: ``MemoryLook``).
    broken: bool = True

    def repair(self, recalled: Recalled, policy: Policy, cancel: Cancel | None = None) -> Result:
        if not self.broken and not altered_thinking.altered(self.body["messages"], recalled):
            return Result(self.body, ())
        view = read(self.body["messages"])
        turns = {key: turn for key, turn in recalled.items() if dialect_of(turn) == "messages"}
        # The structural rules read remembered turns as they read the history: as the view.
        remembered = viewed(turns, "messages", view_turn)
        ctx = Pending(view.entries, remembered, policy, self.profile, view.origin, self.body)
        ctx.tools = _client_tools(self.body.get("tools"))  # the rules read the client's tools, not the server tools
        ctx.cancel = cancel
        if refused(ctx, PIPELINE.run("view", self.profile.name)):
            return Result(self.body, tuple(ctx.findings), ctx.rejected)
        ctx.messages, ctx.recalled = write(ctx.messages, view), turns
        ctx.pending = self._pending(ctx.messages, view)
        if refused(ctx, PIPELINE.run("messages", self.profile.name)):
            return Result(self.body, tuple(ctx.findings), ctx.rejected)
        if not ctx.findings:
            return Result(self.body, ())
        body = thinking.sent(self.body, ctx.messages, ctx.findings)
        if ctx.system is not None:  # TM514 folded system messages into it
            body["system"] = ctx.system
        return Result(body, tuple(ctx.findings))


    def _pending(self, messages: list[Any], view: View) -> list[int] | None:
        """The positions of the written messages a Messages rule may change: the client's own that the check
        marked, and those the view rebuilt that ``may_change`` says so of. None (every message) when the profile
        brings rules ``may_change`` does not know (TM514 edits none: it removes system messages, which the view
        never rebuilds)."""
        if self.marked is None or any(rule is not unsigned_thinking and rule is not system_message for rule in self.profile.rules):
            return None
        strips_unsigned = unsigned_thinking in self.profile.rules
        marked = self.marked
        pending: list[int] = []
        for position, index in enumerate(view.placed):
            if index is None:
                if may_change(messages[position], strips_unsigned):
                    pending.append(position)
            elif index in marked:  # the client's own object, as the check saw it
                pending.append(position)
        return pending


def _client_tools(tools: Any) -> list[dict[str, Any]]:
    """The request's client tools as the structural rules read tools (chat's ``function`` shape), so that a call
    synthesized for an orphan result is named after the only tool when there is one. Server tools (``type``
    ``web_search_20250305``...) are left out: a ``tool_result`` never answers them."""
    if type(tools) is not list:
        return []
    return [{"type": "function", "function": {"name": tool["name"]}} for tool in tools
            if type(tool) is dict and type(tool.get("name")) is str and tool.get("type", "custom") == "custom"]


def retried(body: dict[str, Any], profile: Profile, policy: Policy, leaving: Leaving = EVERY) -> Result | None:
    """The body to send once more after the upstream refused a thinking signature in ``body`` (what was sent: the
    repaired body, or the client's), with the findings; None when there was no thinking to remove, or under thinking
    policy ``reject`` (the refusal then goes to the client)."""
    messages = body.get("messages")
    if policy.thinking != "drop" or type(messages) is not list:
        return None
    ctx = Refusing(list(messages), {}, policy, profile, request=body)
    ctx.leaving = leaving
    # TM513 removes the thinking, then TM510 turns ``thinking`` off when the final tool turn no longer starts with it.
    if refused(ctx, PIPELINE.run("retry", profile.name)) or not any(finding.code == refused_signature.RULE.code for finding in ctx.findings):
        return None
    return Result(thinking.sent(body, ctx.messages, ctx.findings), tuple(ctx.findings))


def plan(body: dict[str, Any], profile: Profile) -> MessagesPlan | None:
    found = inspect(body, profile)
    if not found.broken and not found.wanted:
        return None
    # A history the check passes has no ids twice: what it wants then is the latest message's calls, each once.
    wanted = list(dict.fromkeys(found.wanted)) if found.broken else found.wanted
    return MessagesPlan(body, profile, wanted, frozenset(found.marked), found.broken)
