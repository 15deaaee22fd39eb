"""The Anthropic Messages API (``POST /v1/messages``): a history of user and assistant messages made of blocks.

``blocks.py`` names the block types, ``capture.py`` reads answers into remembered turns (every block of an
assistant message that calls a tool, thinking with its signature), ``view.py`` reads the messages into the
engine's view and writes it back, ``check.py`` is the fast path, ``plan.py`` runs the structural rules and then
the Messages rules of ``rules/``; ``profiles.py`` says which servers keep unsigned thinking, ``errors.py`` renders
errors in Anthropic's shape and ``surrogates.py`` mends lone surrogates before a body is parsed (AM-21). A 400
refusing a thinking signature (AM-14) is answered by sending the request again without its thinking
(``rules/refused_signature.py``, ``plan.retried``), under thinking policy ``drop``.
"""

from collections import Counter
from typing import Any

import orjson
from starlette.responses import Response

from proxy.dialects.dialect import Blobs, Facts, ListHistory, RefusalFix, rejection
from proxy.dialects.messages import surrogates
from proxy.dialects.messages.capture import CAPTURE
from proxy.dialects.messages.errors import anthropic_error
from proxy.dialects.messages.plan import MessagesPlan, plan, retried
from proxy.dialects.messages.profiles import messages_profile
from proxy.dialects.messages.rules import PIPELINE, refused_signature
from proxy.repair import Finding, Policy, Profile
from proxy.turns import Dialect as DialectName


class MessagesDialect(ListHistory):
    name: DialectName = "messages"
    path = "/messages"
    #: count_tokens carries the same history: repaired alike, it counts what /v1/messages will send, and a
    #: history the upstream would refuse there (AM-4) is not refused here either.
    paths = ("/messages", "/messages/count_tokens")
    history_key = "messages"
    history_entries = "messages and their content blocks"
    capture = CAPTURE
    pipeline = PIPELINE
    #: A 400 refusing a thinking signature (AM-14): sent once more without its thinking (TM513).
    refusal_fixes = (RefusalFix(refused_signature.refused, retried,
                                Blobs(refused_signature.carried, refused_signature.recall_keys, refused_signature.minted)),)
    error = staticmethod(anthropic_error)

    def profile(self, name: str) -> Profile:
        return messages_profile(name)

    def plan(self, body: dict[str, Any], profile: Profile, facts: Facts | None = None,
             policy: Policy | None = None) -> MessagesPlan | None:
        return plan(body, profile)

    def rejection(self, finding: Finding) -> Response:
        return rejection(finding, anthropic_error, f"messages.{finding.index}", f"messages.{finding.index}")

    def mend(self, body: bytes, error: orjson.JSONDecodeError) -> tuple[bytes, Counter[str]] | None:
        """Lone surrogates (a tool output cut inside an emoji) become U+FFFD; Anthropic refuses them (AM-21)."""
        mended = surrogates.mend(body) if "surrogate" in str(error) else None
        if mended is None:
            return None
        fixed, count = mended
        return fixed, Counter({surrogates.RULE.code: count})


MESSAGES = MessagesDialect()
