"""Planning and repairing a Gemini request: the Gemini rules around the structural rules over the view.

``plan`` runs the one-pass check (``check.py``) for the request's target (``target.GeminiTarget``: endpoint family
and model, which the path gives, not the body); ``GeminiPlan.repair`` runs the rules that shape ``contents`` before
the view, reads them into the neutral view (``view.py``), runs the structural rules every dialect shares (and TM606)
with the remembered turns in hand, writes the view back into contents, runs the rules after the view (signatures
last), and answers with the request body holding the new contents. Every finding names the position of the content
as the client sent it. The phases and their order are ``rules/__init__.py``'s.

``retried`` answers the upstream rather than the client: when it refused a thought signature (GN-12), what was sent
goes through the ``retry`` phase (TM612) to be sent once more; its findings name positions in that body.

The Gemini rules that edit one content at a time visit only the pending contents (``rules/edit.py``): all but the
client's own that the check did not mark, so a long history whose repair touches a few hundred contents is not
walked once per rule. For the same reason the view leaves out the runs of contents no structural rule would touch
(``view.inert_runs``): call contents the check found answered exactly, whose calls nothing else names, and contents of
neither calls nor responses.

``recall`` holds what the repair may need from memory: the ids of orphan responses' calls and, for Gemini 3, the
keys (``keys.call_key``) of the current turn's calls that came without their thought signature.
"""

from dataclasses import dataclass
from typing import Any

from proxy.dialects.dialect import viewed
from proxy.dialects.gemini.check import inspect
from proxy.dialects.gemini.parts import CALL, function_call, id_of
from proxy.dialects.gemini.rules import PIPELINE
from proxy.dialects.gemini.rules.edit import gemini_context
from proxy.dialects.gemini.target import DEVELOPER, GeminiTarget
from proxy.dialects.gemini.view import inert_runs, is_view_id, read, view_turn, write
from proxy.dialects.refusal import EVERY, Leaving, Refusing
from proxy.repair.cancel import Cancel
from proxy.repair.context import Recalled
from proxy.repair.engine import Result, refused
from proxy.repair.findings import Policy
from proxy.repair.profile import Profile


@dataclass(frozen=True, slots=True)
class GeminiPlan:
    body: dict[str, Any]
    profile: Profile
    recall: list[str]
    target: GeminiTarget = DEVELOPER
    #: The positions of the client's contents the check found a rule that edits one content at a time may change
    #: (None: not known, so those rules walk every content, and the view reads every content).
    marked: frozenset[int] | None = None
    #: The call contents the contents after them answer exactly (by position: the call content's, and the last
    #: answering one's), and the ids of every other response (``check.Inspection``): what the view may leave out
    #: (``view.inert_runs``).
    exact: tuple[tuple[int, int], ...] = ()
    loose: frozenset[str] = frozenset()

    def repair(self, recalled: Recalled, policy: Policy, cancel: Cancel | None = None) -> Result:
        ctx = gemini_context(list(self.body["contents"]), self.body, recalled, policy, self.profile, self.target)
        ctx.cancel = cancel
        if self.marked is not None:
            ctx.pending = [False] * len(ctx.messages)
            for at in self.marked:
                ctx.pending[at] = True
        if refused(ctx, PIPELINE.run("contents", self.profile.name)):
            return Result(self.body, tuple(ctx.findings), ctx.rejected)
        runs = inert_runs(ctx.messages, self._sealed(recalled)) if self.marked is not None else ()
        view = read(ctx.messages, ctx.origin, runs)
        ctx.messages, read_pending, ctx.pending = view.entries, ctx.pending, None
        ctx.paired(view.pairing)
        # The structural rules read remembered turns as they read the history: as the view.
        ctx.recalled = viewed(recalled, "gemini", view_turn)
        if refused(ctx, PIPELINE.run("view", self.profile.name)):
            return Result(self.body, tuple(ctx.findings), ctx.rejected)
        ctx.messages, ctx.recalled = write(ctx.messages, view, ctx.origin), recalled
        ctx.pending = _written_pending(view.placed, read_pending)
        if refused(ctx, PIPELINE.run("written", self.profile.name)):
            return Result(self.body, tuple(ctx.findings), ctx.rejected)
        if not ctx.findings:
            return Result(self.body, ())
        return Result({**self.body, "contents": ctx.messages}, tuple(ctx.findings))

    def _sealed(self, recalled: Recalled) -> dict[int, tuple[list[Any], ...]]:
        """Each call content the contents after it answer exactly, by the identity of its first call part -> the parts
        lists of those contents (by identity: a content the rules over contents copied with other parts is not the one
        the check judged), where no other response nor remembered turn names one of its calls (a restored turn would
        take it). None of them when a remembered id is shaped like the view's own for a call without one (it may meet it)."""
        contents = self.body["contents"]
        remembered: set[str] = set().union(*(turn.get("ids", ()) for turn in recalled.values()))
        if any(map(is_view_id, remembered)):
            return {}
        named = self.loose | remembered
        sealed: dict[int, tuple[list[Any], ...]] = {}
        for start, end in self.exact:
            calls = [part for part in contents[start]["parts"] if function_call(part) is not None]
            if not any(key in named for part in calls if (key := id_of(part[CALL])) is not None):
                sealed[id(calls[0])] = tuple(contents[at]["parts"] for at in range(start + 1, end + 1))
        return sealed


def _written_pending(placed: list[int | None], read_pending: list[bool] | None) -> list[bool] | None:
    """Per written content, whether a rule that edits one content at a time may change it: one the view rebuilt, or
    one it wrote back as it was read that was pending then (None: every content)."""
    if read_pending is None:
        return None
    return [at is None or read_pending[at] for at in placed]


def plan(body: dict[str, Any], profile: Profile, facts: GeminiTarget = DEVELOPER, policy: Policy | None = None) -> GeminiPlan | None:
    """None when ``body`` needs no repair for ``facts`` (where it goes) under ``policy`` (the operator's; None: the
    default, under which a history ending with the model's text goes as sent); else the plan, with the keys to recall."""
    found = inspect(body, facts, policy is not None and policy.continue_model_turn)
    if not found.broken:
        return None
    exact = (*((at, at + 1) for at in found.exact), *found.spread)
    return GeminiPlan(body, profile, list(dict.fromkeys(found.wanted)), facts, frozenset(found.marked), exact, frozenset(found.loose))


def retried(body: dict[str, Any], profile: Profile, policy: Policy, leave: Leaving = EVERY) -> Result | None:
    """The body to send once more after the upstream refused a thought signature in ``body`` (what was sent), with the
    findings; None when it carries none to remove, or under thinking policy ``reject`` (the refusal goes to the client)."""
    contents = body.get("contents")
    if policy.thinking != "drop" or type(contents) is not list:
        return None
    ctx = Refusing(list(contents), {}, policy, profile, request=body)
    ctx.leaving = leave
    if refused(ctx, PIPELINE.run("retry", profile.name)) or not ctx.findings:
        return None
    return Result({**body, "contents": ctx.messages}, tuple(ctx.findings))
