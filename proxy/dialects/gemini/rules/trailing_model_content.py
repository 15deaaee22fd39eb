r"""A history that ends with a model content of its own text: a prefill (the start of an answer the client wants the
model to go on with), or an agent that sent the model's last answer back without a new user turn.

Whether that is refused depends on what serves it, which the request's path does not tell. The Code Assist backends
behind Antigravity and Gemini CLI's Google login refuse it (``Requests ending with a model turn are not supported``,
2026); the Developer API refused it in 2023 (``Please ensure that multiturn requests ends with a user role or a
function response.``), and whether it still refuses a prefill is unverified. A prefill an upstream takes must go as
sent, so this is the operator's choice, off by default: with ``--continue-model-turn`` a user content
(``CONTINUE_TEXT``) goes after it, asking the model to continue; the model's text stays (dropping it would lose what
the client sent). Whatever the setting, a trailing call content gets placeholder responses (TM104) and a trailing
empty one is removed (TM607): every server refuses those. Answers GN-6.

Bad:
    {"role": "user", "parts": [{"text": "Write a haiku about rain."}]}
    {"role": "model", "parts": [{"text": "Soft rain on the roof,"}]}
Good:
    {"role": "user", "parts": [{"text": "Write a haiku about rain."}]}
    {"role": "model", "parts": [{"text": "Soft rain on the roof,"}]}
    {"role": "user", "parts": [{"text": "(continue)"}]}
"""

from typing import Any

from proxy.dialects.gemini.parts import MODEL, USER, function_call, parts_of
from proxy.dialects.gemini.rules.edit import made_like, splice
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM614", "trailing-model-content", ("GN-6",))

#: The user content put after a history that may not end with the model's turn.
CONTINUE_TEXT = "(continue)"


def ends_with_model_text(contents: list[Any]) -> bool:
    """Whether the last content is a model content with parts and no call part."""
    if not contents:
        return False
    last = contents[-1]
    parts = parts_of(last)
    return bool(parts) and last.get("role") == MODEL and not any(function_call(part) is not None for part in parts or ())


def apply(ctx: Context) -> None:
    if ctx.policy.continue_model_turn and ends_with_model_text(ctx.messages):
        last = ctx.messages[-1]
        splice(ctx, [(len(ctx.messages) - 1, [last, made_like(ctx, last, {"role": USER, "parts": [{"text": CONTINUE_TEXT}]})])])
        ctx.report(RULE, last, "inserted", "user content after the model content that ends the history (--continue-model-turn)",
                   len(ctx.messages) - 2)
