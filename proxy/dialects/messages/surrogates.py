r"""Lone UTF-16 surrogates in a request body (AM-21), mended before it is parsed.

A tool's output cut in the middle of an emoji leaves half of a surrogate pair; JavaScript's ``JSON.stringify``
and Python's ``json.dumps`` write it as an escape (``"\ud83d"``) that no strict JSON reader takes. Anthropic
refuses the whole request ("The request body is not valid JSON: no low surrogate in string", even for
``/compact``), and so does toolmend's own parser (orjson). :func:`mend` replaces each lone surrogate escape with
the escape of U+FFFD, the replacement character, which is the same length: nothing else in the body moves, a
valid pair is kept, and an escaped backslash followed by ``u`` is not an escape. Raw surrogate bytes (invalid
UTF-8, which no JSON encoder writes) are not mended: the body stays refused.

The body is not yet parsed, so this is not a rule over the view: the endpoint calls :func:`mend` when parsing
failed on a surrogate, parses the mended body, forwards it, and counts ``RULE`` among the repairs.
"""

import re

from proxy.repair.rule import Rule

RULE = Rule("TM512", "lone-surrogate", ("AM-21",))

REPLACEMENT = rb"\ufffd"

# An escape is a backslash preceded by an even number of backslashes (an escaped backslash is two). A high
# surrogate is kept with the low one right after it; any other surrogate escape stands alone.
_SURROGATE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u([dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?|[dD][c-fC-F][0-9a-fA-F]{2})")


def mend(body: bytes) -> tuple[bytes, int] | None:
    """The body with every lone surrogate escape replaced by U+FFFD's, and how many there were; None when there
    were none (the body is broken some other way, or not at all)."""
    count = 0

    def replace(match: re.Match[bytes]) -> bytes:
        nonlocal count
        if len(match.group(2)) > 4:  # a high surrogate with its low one: a valid pair
            return match.group(0)
        count += 1
        return match.group(1) + REPLACEMENT

    mended = _SURROGATE.sub(replace, body)
    return (mended, count) if count else None
