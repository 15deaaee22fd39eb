"""Chat Completions (``POST /v1/chat/completions``): the dialect whose history is the engine's own view.

Its messages are read by the rules as they are (the neutral view is chat-shaped): ``check.py`` is the fast path,
``plan.py`` runs chat's pipeline (``rules/__init__.py``: the structural rules every dialect shares, chat's own and each
profile's), ``profiles.py`` holds the profiles (and which one a route's upstream or a request's model selects), its
answers are captured by ``capture.py`` and its errors are OpenAI's.
"""

from typing import Any

from starlette.responses import Response

from proxy.dialects.chat.capture import CAPTURE
from proxy.dialects.chat.plan import Plan, plan
from proxy.dialects.chat.profiles import get_profile
from proxy.dialects.chat.rules import PIPELINE
from proxy.dialects.dialect import Facts, ListHistory, rejection
from proxy.errors import error_response
from proxy.repair import Finding, Policy, Profile
from proxy.turns import Dialect as DialectName


class ChatDialect(ListHistory):
    name: DialectName = "chat"
    path = "/chat/completions"
    history_key = "messages"
    also_counted = "tool_calls"
    history_entries = "messages, their content parts and tool calls"
    capture = CAPTURE
    pipeline = PIPELINE
    error = staticmethod(error_response)

    def profile(self, name: str) -> Profile:
        return get_profile(name)

    def plan(self, body: dict[str, Any], profile: Profile, facts: Facts | None = None,
             policy: Policy | None = None) -> Plan | None:
        return plan(body, profile)

    def rejection(self, finding: Finding) -> Response:
        return rejection(finding, error_response, f"messages[{finding.index}]", f"messages.[{finding.index}]")


CHAT = ChatDialect()
