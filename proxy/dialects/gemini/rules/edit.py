"""What the Gemini rules share: the repair context with the request's target, and writing a changed content.

The rules run over ``contents`` (before the view is read, or after it is written back), where an untouched content
is still the client's own object; a rule never edits one of those in place (the request body stays as the client
sent it), it replaces it with a copy, and ``origin`` learns the copy so findings keep naming the client's positions.
"""

from collections.abc import Callable
from itertools import islice
from operator import and_
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


def merge_runs(ctx: Context, rule: Rule, alike: Callable[[Any], bool], what: str, role: str | None = None) -> None:
    """Each run of consecutive contents that are ``alike`` becomes its first one's copy holding all their parts, in
    order; a finding for each content merged says how many ``what`` (``part(s)``) it brought. The list is rebuilt
    once, and a run's parts gathered in one list: merging two at a time was quadratic in a long run. ``role``, when
    given, is the role (``user`` when absent) of every content that is ``alike``: only a content next to one of that
    same role is asked (a run needs two)."""
    contents = ctx.messages
    if role is None:
        flags = list(map(alike, contents))
    else:
        roles = [content.get("role", USER) if type(content) is dict else None for content in contents]
        pairs = [at for at, (before, this) in enumerate(zip(roles, islice(roles, 1, None), strict=False), 1)
                 if this == role and before == role]
        flags = [False] * len(contents)
        for at in {at for second in pairs for at in (second - 1, second)}:
            flags[at] = alike(contents[at])
    if not any(map(and_, flags, islice(flags, 1, None))):
        return
    out: list[Any] = []
    run: list[Any] | None = None  # the parts of the content out[-1] is, once a second one joins it
    last = False  # whether out[-1] is alike
    for position, (content, current) in enumerate(zip(contents, flags, strict=True)):
        if current and last:
            if run is None:
                run = list(out[-1]["parts"])
                out[-1] = copy(ctx, out[-1], parts=run)
            run += content["parts"]
            ctx.report(rule, content, "merged", f"{len(content['parts'])} {what} merged into the content before", position)
            continue
        run, last = None, current
        out.append(content)
    contents[:] = out


def split_off(ctx: Context, rule: Rule, mixed: Callable[[Any], bool], moves: Callable[[Any], bool], what: str) -> None:
    """Each content that is ``mixed`` keeps the parts that do not ``move`` (it goes when none is left) and gives the
    others, in their order, to a user content right after it; a finding for each says how many ``what`` moved."""
    contents = ctx.messages
    flags = list(map(mixed, contents))
    if not any(flags):
        return
    out: list[Any] = []
    for position, (content, flag) in enumerate(zip(contents, flags, strict=True)):
        if not flag:
            out.append(content)
            continue
        staying: list[Any] = []
        moving: list[Any] = []
        for part in content["parts"]:
            (moving if moves(part) else staying).append(part)
        if staying:
            out.append(copy(ctx, content, parts=staying))
        out.append(made_like(ctx, content, {"role": USER, "parts": moving}))
        ctx.report(rule, content, "split", f"{len(moving)} {what} moved into a user content after it", position)
    contents[:] = out
