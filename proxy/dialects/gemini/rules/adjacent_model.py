r"""Consecutive ``model`` contents: parallel calls stored one content each, a text answer and the calls that
followed it stored apart.

Gemini refuses a call content that does not follow a user content or a function response content (``Please ensure
that function call turn comes immediately after a user turn or after a function response turn.``, 400
``INVALID_ARGUMENT``). The run of model contents becomes one content, their parts in order. Answers GN-3.

Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnbmF0dXJl"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Rome"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}, {"functionResponse": {"name": "weather", "response": {"temp": "24C"}}}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnbmF0dXJl"}, {"functionCall": {"name": "weather", "args": {"city": "Rome"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}, {"functionResponse": {"name": "weather", "response": {"temp": "24C"}}}]}
"""

from typing import Any

from proxy.dialects.gemini.parts import MODEL
from proxy.dialects.gemini.rules.edit import merge_runs
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM603", "adjacent-model-contents", ("GN-3",))


def _is_model(content: Any) -> bool:
    return type(content) is dict and content.get("role") == MODEL and type(content.get("parts")) is list


def apply(ctx: Context) -> None:
    merge_runs(ctx, RULE, _is_model, "part(s)", MODEL)
