r"""A content whose role Gemini does not take: the legacy ``function`` role of function responses, ``tool`` from an
OpenAI bridge, ``assistant`` for the model, a mid-conversation ``system`` content.

Gemini takes ``user`` and ``model`` only in ``contents`` (``Please use a valid role: user, model.``; 2026: ``Role
'function' is not supported. Please use a valid role: SYSTEM, ...``, 400 ``INVALID_ARGUMENT``). ``function``,
``tool`` and ``system`` become ``user``, ``assistant`` becomes ``model``; the parts are kept as sent. Answers GN-5.

Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "assistant", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "function", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
"""

from proxy.dialects.gemini.rules.edit import copy, pending
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM605", "legacy-role", ("GN-5",))

#: Each role Gemini refuses that a client sends, and the one it means.
ROLES = {"function": "user", "tool": "user", "system": "user", "assistant": "model"}


def apply(ctx: Context) -> None:
    contents = ctx.messages
    for position in pending(ctx):
        content = contents[position]
        role = content.get("role") if type(content) is dict else None
        if type(role) is str and (meant := ROLES.get(role)) is not None:
            contents[position] = copy(ctx, content, role=meant)
            ctx.report(RULE, content, "renamed", f"role {role!r} -> {meant!r}", position)
