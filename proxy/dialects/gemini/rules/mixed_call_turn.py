r"""A ``model`` content that holds function responses beside its calls (a client that appended the results to the
call content).

Gemini refuses it (``Please ensure that function call turn contains at least one function_call part which can not
be mixed with function_response parts.``, 400 ``INVALID_ARGUMENT``). The response parts move, in their order, into a
user content right after it; the model's parts stay as they were. Answers GN-4.

Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}, {"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
"""

from typing import Any

from proxy.dialects.gemini.parts import MODEL, function_response
from proxy.dialects.gemini.rules.edit import split_off
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM604", "mixed-call-turn", ("GN-4",))


def is_mixed(content: Any) -> bool:
    """A model content with a response part."""
    if type(content) is not dict or content.get("role") != MODEL or type(parts := content.get("parts")) is not list:
        return False
    return any(function_response(part) is not None for part in parts)


def apply(ctx: Context) -> None:
    split_off(ctx, RULE, is_mixed, lambda part: function_response(part) is not None, "function response(s)")
