"""The wire protocols toolmend repairs, one package each, behind one seam (``dialect.py``).

Adding a protocol is adding a package that implements ``Dialect`` (its view of the history, its capture,
profiles, errors, and its pipeline: every rule it runs, by phase, in ``rules/__init__.py``) and naming it here; the
request path, memory, metrics, the structural rules and the rule registry (``proxy/registry.py``) are shared.
"""

from proxy.dialects.chat import CHAT
from proxy.dialects.dialect import Dialect
from proxy.dialects.gemini import GEMINI
from proxy.dialects.messages import MESSAGES
from proxy.dialects.responses import RESPONSES

#: Every repaired endpoint, by dialect.
DIALECTS: tuple[Dialect, ...] = (CHAT, RESPONSES, MESSAGES, GEMINI)


__all__ = ["CHAT", "DIALECTS", "GEMINI", "MESSAGES", "RESPONSES", "Dialect"]
