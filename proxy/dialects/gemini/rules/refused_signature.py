r"""The upstream refused a ``thoughtSignature``: corrupted on the way, minted by another provider or model family, made
up by a bridge (a synthetic or a dummy value where the endpoint takes none): nothing in a request tells a foreign
signature from a good one, so this rule runs on the refusal.

Gemini refuses the request (GN-12: ``Corrupted thought signature.``; Vertex ``Unable to submit request because Thought
signature is not valid.. Learn more: ...``; ``Invalid thought signature``; status 400 ``INVALID_ARGUMENT``). A
signature cannot be made or mended, so under thinking policy ``drop`` the signatures memory did not capture for this
tenant are removed from the model contents (every one when memory captured all of them or none), the parts kept
otherwise as sent, and what was sent goes once more to the same upstream. A second refusal (a Gemini 3 call of the
current turn now unsigned, GN-11), like any other answer, reaches the client as the upstream sent it; under
``reject`` the first does. What the retry left out is remembered when the retry is accepted (by digest), and left out
of the tenant's later requests before they are sent. Answers GN-12.

Request:
    {"family": "developer", "model": "gemini-2.5-flash"}
Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "Zm9yZWlnbg=="}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
"""

from collections.abc import Iterable, Iterator
from typing import Any

from proxy.dialects.gemini.keys import call_key
from proxy.dialects.gemini.parts import MODEL, SIGNATURE
from proxy.dialects.gemini.rules.edit import copy
from proxy.dialects.refusal import STATUS, Refusal, leaving
from proxy.repair.context import Context
from proxy.repair.rule import Rule
from proxy.turns import Turn

RULE = Rule("TM612", "refused-thought-signature", ("GN-12",))

#: Each wording of the refusal, as ``Refusal.says`` compares them (lower case): the Developer API's, Vertex's, and the
#: one a signature that is no base64 gets.
WORDINGS = ("corrupted thought signature", "thought signature is not valid", "invalid thought signature")


def refused(refusal: Refusal) -> bool:
    """Whether an upstream's refusal is this one: status 400, and a message in one of the wordings."""
    return refusal.status == STATUS and any(refusal.says(wording) for wording in WORDINGS)


def _model_parts(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    contents = body.get("contents")
    for content in contents if type(contents) is list else ():
        if type(content) is dict and content.get("role") == MODEL and type(parts := content.get("parts")) is list:
            yield from (part for part in parts if type(part) is dict)


def carried(body: dict[str, Any]) -> list[Any]:
    """The ``thoughtSignature`` of every part of the body's model contents that has one."""
    return [part[SIGNATURE] for part in _model_parts(body) if SIGNATURE in part]


def recall_keys(body: dict[str, Any]) -> list[str]:
    """The keys the turns that may hold those signatures are remembered by: the model contents' calls'."""
    return [key for part in _model_parts(body) if "functionCall" in part and (key := call_key(part["functionCall"])) is not None]


def minted(turn: Turn) -> Iterable[Any]:
    """The signatures of a remembered turn's parts."""
    return (part[SIGNATURE] for part in turn.get("parts", ()) if type(part) is dict and SIGNATURE in part)


def apply(ctx: Context) -> None:
    leave = leaving(ctx)
    why = "the upstream refused this thought signature before" if leave.remembered else "the upstream refused a thought signature"
    contents = ctx.messages
    for position, content in enumerate(contents):
        if type(content) is not dict or content.get("role") != MODEL or type(parts := content.get("parts")) is not list:
            continue
        kept = [{key: value for key, value in part.items() if key != SIGNATURE}
                if type(part) is dict and SIGNATURE in part and leave.leaves(part[SIGNATURE]) else part for part in parts]
        dropped = sum(kept_part is not part for kept_part, part in zip(kept, parts, strict=True))
        if dropped:
            contents[position] = copy(ctx, content, parts=kept)
            ctx.report(RULE, contents[position], "removed", f"{why}: {dropped} thoughtSignature(s) removed")
