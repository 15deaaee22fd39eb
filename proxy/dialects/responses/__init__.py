"""The OpenAI Responses API (``POST /v1/responses``): its history is a flat list of input items.

``items.py`` holds the call families and their outputs, ``capture.py`` reads answers into remembered turns
(every output item of a response, reasoning included), ``view.py`` reads the input into the engine's view
and writes it back, ``check.py`` is the fast path, ``plan.py`` runs the structural rules and then the
Responses rules of ``rules/``; ``profiles.py`` says where outputs must stand. Errors are OpenAI's. A 400 saying the
encrypted content of some reasoning could not be verified (RS-11) is answered by sending the request again without
its reasoning (``rules/refused_reasoning.py``, ``plan.retried``), under thinking policy ``drop``; a 404 naming an item
id the server does not know (RS-8), without that item or its id (``rules/unknown_item.py``).
"""

from typing import Any

from starlette.responses import Response

from proxy.dialects.dialect import Blobs, Facts, ListHistory, RefusalFix, rejection
from proxy.dialects.responses.capture import CAPTURE
from proxy.dialects.responses.plan import ResponsesPlan, plan, retried, retried_unknown
from proxy.dialects.responses.profiles import responses_profile
from proxy.dialects.responses.rules import PIPELINE, refused_reasoning, unknown_item
from proxy.errors import error_response
from proxy.repair import Finding, Policy, Profile
from proxy.turns import Dialect as DialectName


class ResponsesDialect(ListHistory):
    name: DialectName = "responses"
    path = "/responses"
    history_key = "input"
    history_entries = "input items and their content parts"
    capture = CAPTURE
    pipeline = PIPELINE
    #: A 400 saying encrypted content could not be verified (RS-11): sent once more without that reasoning (TM408).
    #: A 404 naming an item id the server does not know (RS-8): sent once more without that item, or its id (TM409).
    refusal_fixes = (RefusalFix(refused_reasoning.refused, retried,
                                Blobs(refused_reasoning.carried, refused_reasoning.recall_keys, refused_reasoning.minted)),
                     RefusalFix(unknown_item.refused, retried_unknown, status=unknown_item.STATUS))
    error = staticmethod(error_response)

    def __init__(self) -> None:
        # What ``retries`` and ``remembered_fix`` answered under the latest policy asked (a frozen one; the operator's
        # is the same for every answer): one tuple, replaced whole, so a reader never mixes two policies' answers.
        self._known: tuple[Policy | None, dict[int, bool], RefusalFix | None] = (None, {}, None)

    def _under(self, policy: Policy) -> tuple[Policy | None, dict[int, bool], RefusalFix | None]:
        self._known = (policy, {}, super().remembered_fix(policy))
        return self._known

    def retries(self, status: int, policy: Policy) -> bool:
        """As every dialect's, kept per policy: every answer asks."""
        known = known if (known := self._known)[0] is policy else self._under(policy)
        retried = known[1].get(status)
        if retried is None:
            retried = known[1][status] = super().retries(status, policy)
        return retried

    def remembered_fix(self, policy: Policy) -> RefusalFix | None:
        """As every dialect's, kept per policy: every request asks."""
        return (known if (known := self._known)[0] is policy else self._under(policy))[2]

    def profile(self, name: str) -> Profile:
        return responses_profile(name)

    def plan(self, body: dict[str, Any], profile: Profile, facts: Facts | None = None,
             policy: Policy | None = None) -> ResponsesPlan | None:
        return plan(body, profile)

    def rejection(self, finding: Finding) -> Response:
        return rejection(finding, error_response, f"input[{finding.index}]", f"input[{finding.index}]")


RESPONSES = ResponsesDialect()
