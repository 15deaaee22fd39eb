"""What the rules about ``previous_response_id`` share: the remembered previous response, if any."""

from proxy.repair.context import Context
from proxy.turns import Turn


def previous_id(request: object) -> str | None:
    value = request.get("previous_response_id") if isinstance(request, dict) else None
    return value if type(value) is str and value else None


def previous_turn(ctx: Context) -> Turn | None:
    """The remembered response the request continues (recalled by its id), or None."""
    key = previous_id(dict(ctx.request))
    return ctx.recalled.get(key) if key is not None else None
