"""The OpenAI Responses API (``POST /v1/responses``): its history is a flat list of input items.

``items.py`` holds the call families and their outputs, ``capture.py`` reads answers into remembered turns
(every output item of a response, reasoning included), ``view.py`` reads the input into the engine's view
and writes it back, ``check.py`` is the fast path, ``plan.py`` runs the structural rules and then the
Responses rules of ``rules/``; ``profiles.py`` says where outputs must stand. Errors are OpenAI's. A 400 saying the
encrypted content of some reasoning could not be verified (RS-11) is answered by sending the request again without
its reasoning (``rules/refused_reasoning.py``, ``plan.retried``), under thinking policy ``drop``.
"""

from typing import Any

from starlette.responses import Response

from proxy.dialects.dialect import ListHistory, RefusalFix, rejection
from proxy.dialects.responses.capture import CAPTURE
from proxy.dialects.responses.plan import ResponsesPlan, plan, retried
from proxy.dialects.responses.profiles import responses_profile
from proxy.dialects.responses.rules import refused_reasoning
from proxy.errors import error_response
from proxy.repair import Finding, Profile
from proxy.turns import Dialect as DialectName


class ResponsesDialect(ListHistory):
    name: DialectName = "responses"
    path = "/responses"
    history_key = "input"
    history_entries = "input items and their content parts"
    capture = CAPTURE
    #: A 400 saying encrypted content could not be verified (RS-11): sent once more without that reasoning (TM408).
    refusal_fix = RefusalFix(refused_reasoning.refused, retried)
    error = staticmethod(error_response)

    def profile(self, name: str) -> Profile:
        return responses_profile(name)

    def plan(self, body: dict[str, Any], profile: Profile) -> ResponsesPlan | None:
        return plan(body, profile)

    def rejection(self, finding: Finding) -> Response:
        return rejection(finding, error_response, f"input[{finding.index}]", f"input[{finding.index}]")


RESPONSES = ResponsesDialect()
