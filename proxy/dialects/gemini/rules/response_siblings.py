r"""A function response content that holds other parts beside its responses: the image or text a tool returned,
put next to the ``functionResponse`` instead of inside it.

Gemini counts the parts of the content after a call content as its responses (``Please ensure that the number of
function response parts is equal to the number of function call parts of the function call turn.``, 400
``INVALID_ARGUMENT``). The other parts move, in their order, into a user content right after the responses. Answers
GN-1.

Bad:
    {"role": "user", "parts": [{"text": "Describe the chart."}]}
    {"role": "model", "parts": [{"functionCall": {"name": "render", "args": {}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "render", "response": {"ok": true}}}, {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]}
Good:
    {"role": "user", "parts": [{"text": "Describe the chart."}]}
    {"role": "model", "parts": [{"functionCall": {"name": "render", "args": {}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "render", "response": {"ok": true}}}]}
    {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBO"}}]}
"""

from typing import Any

from proxy.dialects.gemini.parts import USER, function_response, is_response_content
from proxy.dialects.gemini.rules.edit import split_off
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM602", "response-siblings", ("GN-1",))


def _mixed(content: Any) -> bool:
    """A user content with both response parts and other parts."""
    if type(content) is not dict or content.get("role", USER) != USER or type(parts := content.get("parts")) is not list:
        return False
    # Most user contents the view wrote hold responses only: ``is_response_content`` tells them without a call per part.
    return not is_response_content(content) and any(function_response(part) is not None for part in parts)


def apply(ctx: Context) -> None:
    split_off(ctx, RULE, _mixed, lambda part: function_response(part) is None, "part(s) beside the function responses")
