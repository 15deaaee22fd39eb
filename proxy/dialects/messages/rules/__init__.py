"""Every rule an Anthropic Messages request goes through, in the order they run: Messages' pipeline.

TM512 mends lone surrogates in the raw bytes, before the body is parsed. The structural rules run over the view
(``view.py``): they pair calls and results, which in Anthropic's terms puts each ``tool_result`` in the next user
message, first (AM-1, AM-2, AM-4, AM-5, AM-6). TM501 runs there too, last, so that the ids the others made are held to
Anthropic's pattern. The ``messages`` phase then runs over the messages the view wrote back: first the blocks
Anthropic's schema refuses, then the profile's own (``anthropic``: unsigned thinking; ``deepseek``, ``zai``: system
messages), then where thinking may stand and whether the request may have it: altered thinking of the latest message
is put back as remembered first, trailing thinking goes before the order is judged, the order before AM-9 looks at the
first block, and AM-11 last, so it judges the request as it will be sent. TM515 runs after them all: it puts a message
in front, which would move every position the others visit. The ``retry`` phase runs on no request as the client sent
it, only on what was sent when the upstream refused a thinking signature (``plan.retried``). Each rule is one module
with ``RULE``, a Bad/Good docstring (one message a line) and ``apply(ctx)``; ``edit.py`` and ``thinking.py`` hold what
they share.
"""

from proxy.dialects.messages import surrogates
from proxy.dialects.messages.rules import (
    altered_thinking,
    content_after_tool_use,
    empty_text,
    empty_thinking,
    leading_assistant,
    non_object_input,
    refused_signature,
    stream_keys,
    system_message,
    thinking_disabled,
    thinking_not_first,
    thinking_required,
    tool_use_id,
    trailing_thinking,
    unsigned_thinking,
)
from proxy.repair.pipeline import Phase, Pipeline, Step
from proxy.repair.rules import STRUCTURAL, empty_history

PIPELINE = Pipeline("messages", (
    Phase("raw", "over the body's bytes, when they are not valid JSON, before it is parsed", (surrogates,), applied=False,
          checked=False),
    # The structural rules, in the order chat runs them (TM105 merges consecutive assistant messages that each hold part
    # of the calls), then TM501 over every id they declared. TM208 is not run: no id length rule is known.
    Phase("view", "over the neutral view of the messages", (*STRUCTURAL, tool_use_id)),
    Phase("messages", "over the messages the view wrote back", (
        stream_keys,
        non_object_input,
        empty_text,
        empty_thinking,
        Step(unsigned_thinking, ("anthropic",)),
        Step(system_message, ("deepseek", "zai")),
        altered_thinking,
        trailing_thinking,
        content_after_tool_use,
        thinking_not_first,
        thinking_required,
        thinking_disabled,
        leading_assistant,
        empty_history,
    )),
    # Not on a request as the client sent it: on what was sent, after the upstream refused a thinking signature.
    Phase("retry", "over what was sent, when the upstream refused a thinking signature (AM-14)", (refused_signature, thinking_required), checked=False),
))
