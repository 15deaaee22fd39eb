"""What the Gemini rules share: the repair context with the request's target, and writing a changed content.

The rules run over ``contents`` (before the view is read, or after it is written back), where an untouched content
is still the client's own object; a rule never edits one of those in place (the request body stays as the client
sent it), it replaces it with a copy, and ``origin`` learns the copy so findings keep naming the client's positions.
"""

from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

from proxy.dialects.gemini.parts import USER
from proxy.dialects.gemini.target import DEVELOPER, GeminiTarget
from proxy.repair.context import Context, Recalled
from proxy.repair.findings import Policy
from proxy.repair.profile import Profile
from proxy.repair.rule import Rule


class GeminiContext(Context):
    """A repair context that knows where the request goes (``target``: endpoint family and model) and keeps every
    content the rules made alive (``made``: ``origin`` is keyed by identity)."""

    target: GeminiTarget = DEVELOPER
    made: list[Any]


def gemini_context(contents: list[Any], body: dict[str, Any], recalled: Recalled, policy: Policy, profile: Profile,
                   target: GeminiTarget) -> GeminiContext:
    """The context of one repair of ``body``, whose ``contents`` (a list the rules may change) it walks."""
    ctx = GeminiContext(contents, recalled, policy, profile, request=body)
    # The structural rules read the declared tools in chat's shape.
    ctx.tools, ctx.target, ctx.made = declared_tools(body.get("tools")), target, []
    return ctx


def target_of(ctx: Context) -> GeminiTarget:
    return ctx.target if isinstance(ctx, GeminiContext) else DEVELOPER


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


def _roles(contents: list[Any]) -> list[Any]:
    """Each content's role (``user`` when it has none; None for what is no content)."""
    return [content.get("role", USER) if type(content) is dict else None for content in contents]


def merge_runs(ctx: Context, rule: Rule, alike: Callable[[Any], bool], what: str, role: str | None = None) -> None:
    """Each run of consecutive contents that are ``alike`` becomes its first one's copy holding all their parts, in
    order; a finding for each content merged says how many ``what`` (``part(s)``) it brought. The list is rebuilt
    once, from slices, and a run's parts gathered in one list: merging two at a time was quadratic in a long run.
    ``role``, when given, is the role (``user`` when absent) of every content that is ``alike``: only a content next
    to one of that same role is asked (a run needs two)."""
    contents = ctx.messages
    if role is None:
        pairs: Iterable[int] = range(1, len(contents))
        flags: Sequence[bool] | dict[int, bool] = list(map(alike, contents))
    else:
        roles = _roles(contents)
        pairs = [at for at, (before, this) in enumerate(zip(roles, islice(roles, 1, None), strict=False), 1)
                 if this == role and before == role]
        flags = {at: alike(contents[at]) for second in pairs for at in (second - 1, second)}
    joining = [at for at in pairs if flags[at] and flags[at - 1]]  # each content that joins the one before it
    if not joining:
        return
    out: list[Any] = []
    run: list[Any] = []  # the parts of the content out[-1] is
    done = 0  # contents[:done] are in ``out``
    for at in joining:
        if at - 1 != done - 1:  # a new run (this one does not follow the last merged): it opens with the content before
            out += contents[done:at - 1]
            run = list(contents[at - 1]["parts"])
            out.append(copy(ctx, contents[at - 1], parts=run))
        content = contents[at]
        run += content["parts"]
        ctx.report(rule, content, "merged", f"{len(content['parts'])} {what} merged into the content before", at)
        done = at + 1
    out += contents[done:]
    contents[:] = out


def split_off(ctx: Context, rule: Rule, mixed: Callable[[Any], bool], moves: Callable[[Any], bool], what: str,
              role: str | None = None) -> None:
    """Each content that is ``mixed`` keeps the parts that do not ``move`` (it goes when none is left) and gives the
    others, in their order, to a user content right after it; a finding for each says how many ``what`` moved.
    ``role``, when given, is the role (``user`` when absent) of every content that is ``mixed``: only those are asked."""
    contents = ctx.messages
    if role is None:
        found = [at for at, flag in enumerate(map(mixed, contents)) if flag]
    else:
        found = [at for at, this in enumerate(_roles(contents)) if this == role and mixed(contents[at])]
    if not found:
        return
    out: list[Any] = []
    done = 0
    for at in found:
        out += contents[done:at]
        content = contents[at]
        staying: list[Any] = []
        moving: list[Any] = []
        for part in content["parts"]:
            (moving if moves(part) else staying).append(part)
        if staying:
            out.append(copy(ctx, content, parts=staying))
        out.append(made_like(ctx, content, {"role": USER, "parts": moving}))
        ctx.report(rule, content, "split", f"{len(moving)} {what} moved into a user content after it", at)
        done = at + 1
    out += contents[done:]
    contents[:] = out
