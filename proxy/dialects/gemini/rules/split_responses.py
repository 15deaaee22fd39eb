r"""The responses to one call content spread over several contents: an OpenAI bridge that makes each ``tool``
message a content of its own, an agent that sends each parallel result as it comes, a placeholder put after them.

Gemini wants all the responses of a call content in the one content right after it (``Please ensure that the
number of function response parts is equal to the number of function call parts of the function call turn.``, 400
``INVALID_ARGUMENT``). Consecutive function response contents become one, their parts in order. Answers GN-1.

Bad:
    {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}, {"functionCall": {"name": "weather", "args": {"city": "Rome"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "24C"}}}]}
Good:
    {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]}
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Paris"}}}, {"functionCall": {"name": "weather", "args": {"city": "Rome"}}}]}
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"temp": "18C"}}}, {"functionResponse": {"name": "weather", "response": {"temp": "24C"}}}]}
"""

from proxy.dialects.gemini.parts import USER, is_response_content
from proxy.dialects.gemini.rules.edit import merge_runs
from proxy.repair.context import Context
from proxy.repair.rule import Rule

RULE = Rule("TM601", "split-function-responses", ("GN-1",))


def apply(ctx: Context) -> None:
    merge_runs(ctx, RULE, is_response_content, "function response(s)", USER)
