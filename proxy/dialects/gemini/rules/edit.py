"""What the Gemini rules share: the repair context with the request's target, and writing a changed content.

The rules run over ``contents`` (before the view is read, or after it is written back), where an untouched content
is still the client's own object; a rule never edits one of those in place (the request body stays as the client
sent it), it replaces it with a copy, and ``origin`` learns the copy so findings keep naming the client's positions.

A rule that edits one content at a time visits only the ``pending`` contents, when the context knows them: the
client's own that the plan's check marked, what the rules made and what the view rebuilt (the plan names them); a
long history whose repair touches a few hundred contents is not judged whole by each rule. A rule that changes how
many contents there are does it with ``splice``, which keeps the pending positions true: while the rules run, the flags
change only there, so the rules between two splices visit the positions listed once.
"""

from collections.abc import Callable, Sequence
from contextlib import suppress
from itertools import repeat
from operator import eq
from typing import Any

from proxy.dialects.gemini.parts import USER
from proxy.dialects.gemini.target import DEVELOPER, GeminiTarget
from proxy.repair.context import Context, Recalled
from proxy.repair.findings import Policy
from proxy.repair.profile import Profile
from proxy.repair.rule import Rule


class GeminiContext(Context):
    """A repair context that knows where the request goes (``target``: endpoint family and model), keeps every
    content the rules made alive (``made``: ``origin`` is keyed by identity) and may know, per content (a list beside
    ``messages``), whether a rule that edits one content at a time may change it (``pending``; None: any content)."""

    target: GeminiTarget = DEVELOPER
    made: list[Any]
    pending: list[bool] | None = None
    #: The positions ``pending`` last listed, with the flags they were read from: the rules that follow one another
    #: without a ``splice`` (which forgets them) visit the same ones.
    listed: tuple[list[bool], list[int]] | None = None


def gemini_context(contents: list[Any], body: dict[str, Any], recalled: Recalled, policy: Policy, profile: Profile,
                   target: GeminiTarget) -> GeminiContext:
    """The context of one repair of ``body``, whose ``contents`` (a list the rules may change) it walks."""
    ctx = GeminiContext(contents, recalled, policy, profile, request=body)
    # The structural rules read the declared tools in chat's shape.
    ctx.tools, ctx.target, ctx.made = declared_tools(body.get("tools")), target, []
    return ctx


def target_of(ctx: Context) -> GeminiTarget:
    return ctx.target if isinstance(ctx, GeminiContext) else DEVELOPER


def pending(ctx: Context) -> Sequence[int]:
    """The positions, ascending, of the contents a rule that edits one content at a time may change (the rules that
    follow one another without a ``splice`` share them: not to be changed)."""
    if not isinstance(ctx, GeminiContext) or ctx.pending is None:
        return range(len(ctx.messages))
    flags = ctx.pending
    if ctx.listed is not None and ctx.listed[0] is flags:  # the list is held there, so no other takes its identity
        return ctx.listed[1]
    positions: list[int] = []
    at = -1
    with suppress(ValueError):  # ``index`` scans in C, and ends the search at the last one
        while True:
            at = flags.index(True, at + 1)
            positions.append(at)
    ctx.listed = flags, positions
    return positions


def splice(ctx: Context, edits: list[tuple[int, list[Any]]]) -> None:
    """Replace the content at each position of ``edits`` (ascending) with its list of contents (none: removed),
    rebuilding the list once, from slices. What comes in is pending; the pending positions after an edit move."""
    if not edits:
        return
    contents = ctx.messages
    flags = ctx.pending if isinstance(ctx, GeminiContext) else None
    out: list[Any] = []
    flagged: list[bool] = []
    done = 0
    for at, replacement in edits:
        if len(replacement) == 1:  # in place, as nothing after it moves: the slice it is in is cut later
            contents[at] = replacement[0]
            if flags is not None:
                flags[at] = True
            continue
        out += contents[done:at]
        out += replacement
        if flags is not None:
            flagged += flags[done:at]
            flagged += [True] * len(replacement)
        done = at + 1
    out += contents[done:]
    contents[:] = out
    if flags is not None:
        flagged += flags[done:]
        flags[:] = flagged
    if isinstance(ctx, GeminiContext):
        ctx.listed = None  # the pending positions moved


def made_like(ctx: Context, content: Any, made: dict[str, Any]) -> dict[str, Any]:
    """``made``, a content the rules made from ``content``, at the client's position of ``content``."""
    ctx.origin[id(made)] = ctx.index_of(content)
    if isinstance(ctx, GeminiContext):
        ctx.made.append(made)
    return made


def copy(ctx: Context, content: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``content`` with ``changes``, at the client's position of ``content``."""
    return made_like(ctx, content, {**content, **changes})


def declared_tools(tools: Any) -> list[dict[str, Any]]:
    """The request's function declarations as the structural rules read tools (chat's ``function`` shape), so that a
    call synthesized for an orphan response is named after the only function when there is one."""
    if type(tools) is not list:
        return []
    return [{"type": "function", "function": {"name": declaration["name"]}}
            for tool in tools if type(tool) is dict and type(declarations := tool.get("functionDeclarations")) is list
            for declaration in declarations if type(declaration) is dict and type(declaration.get("name")) is str]


def _after_same_role(contents: list[Any], role: str) -> list[int]:
    """The positions of the contents of ``role`` (``user`` when absent) that follow one of it."""
    try:  # read and compared in C, a byte per content: each rule that merges runs asks it of every content
        of_role = bytes(map(eq, map(dict.get, contents, repeat("role"), repeat(USER)), repeat(role)))
    except TypeError:  # something that is not a content among them (never of role ``role``)
        of_role = bytes(type(content) is dict and content.get("role", USER) == role for content in contents)
    positions: list[int] = []
    at = of_role.find(b"\1\1")
    while at != -1:  # a run of three holds two pairs: the next search starts at the second content of this one
        at += 1
        positions.append(at)
        at = of_role.find(b"\1\1", at)
    return positions


def merge_runs(ctx: Context, rule: Rule, alike: Callable[[Any], bool], what: str, role: str) -> None:
    """Each run of consecutive contents that are ``alike`` becomes its first one's copy holding all their parts, in
    order; a finding for each content merged says how many ``what`` (``part(s)``) it brought. The list is rebuilt
    once (``splice``), and a run's parts gathered in one list: merging two at a time was quadratic in a long run.
    ``role`` is the role (``user`` when absent) of every content that is ``alike``: only a content next to one of that
    same role is asked (a run needs two)."""
    contents = ctx.messages
    pairs = _after_same_role(contents, role)
    flags = {at: alike(contents[at]) for second in pairs for at in (second - 1, second)}
    joining = [at for at in pairs if flags[at] and flags[at - 1]]  # each content that joins the one before it
    if not joining:
        return
    edits: list[tuple[int, list[Any]]] = []
    run: list[Any] = []  # the parts of the run's first content
    last = -1  # the last content merged
    for at in joining:
        if at - 1 != last:  # a new run (this one does not follow the last merged): it opens with the content before
            run = list(contents[at - 1]["parts"])
            edits.append((at - 1, [copy(ctx, contents[at - 1], parts=run)]))
        content = contents[at]
        run += content["parts"]
        ctx.report(rule, content, "merged", f"{len(content['parts'])} {what} merged into the content before", at)
        edits.append((at, []))
        last = at
    splice(ctx, edits)


def split_off(ctx: Context, rule: Rule, mixed: Callable[[Any], bool], moves: Callable[[Any], bool], what: str) -> None:
    """Each pending content that is ``mixed`` keeps the parts that do not ``move`` (it goes when none is left) and gives
    the others, in their order, to a user content right after it; a finding for each says how many ``what`` moved."""
    contents = ctx.messages
    found = [at for at in pending(ctx) if mixed(contents[at])]
    if not found:
        return
    edits: list[tuple[int, list[Any]]] = []
    for at in found:
        content = contents[at]
        staying: list[Any] = []
        moving: list[Any] = []
        for part in content["parts"]:
            (moving if moves(part) else staying).append(part)
        split = [copy(ctx, content, parts=staying)] if staying else []
        edits.append((at, [*split, made_like(ctx, content, {"role": USER, "parts": moving})]))
        ctx.report(rule, content, "split", f"{len(moving)} {what} moved into a user content after it", at)
    splice(ctx, edits)
