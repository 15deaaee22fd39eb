"""The characters both dialects allow in an id, and the test of many ids at once that their fast checks use.

Anthropic's ``tool_use`` ids (AM-7, ``^[a-zA-Z0-9_-]+$``) and the Responses API's item ids (RS-12) are letters,
digits, ``_`` and ``-``. The one-pass checks meet every id of a long history; matching them all in one go, joined
by newlines, costs a fraction of a match per id.
"""

import re
from collections.abc import Collection
from typing import Final

ID_CHARACTERS: Final = re.compile(r"[A-Za-z0-9_-]+")
#: ID_CHARACTERS' ids, one or more, joined by newlines (a newline is no id character).
_JOINED: Final = re.compile(r"[A-Za-z0-9_-]+(?:\n[A-Za-z0-9_-]+)*")


def all_id_characters(ids: Collection[str]) -> bool:
    """Whether every id is one or more of the allowed characters (``ID_CHARACTERS.fullmatch`` of each). An id that
    holds a newline adds one to the joined ids: it fails the count."""
    if not ids:
        return True
    joined = "\n".join(ids)
    return _JOINED.fullmatch(joined) is not None and joined.count("\n") == len(ids) - 1
