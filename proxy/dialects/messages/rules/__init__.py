"""The Messages rules, in the order they run, after the structural rules.

The structural rules run over the view (``view.py``): they pair calls and results, which in Anthropic's terms
puts each ``tool_result`` in the next user message, first (AM-1, AM-2, AM-4, AM-5, AM-6). TM501 runs there too,
last, so that the ids the others made are held to Anthropic's pattern. The rules below then run over the
messages the view wrote back: first the blocks Anthropic's schema refuses (``BLOCK_RULES``), then the profile's
own (``anthropic``: unsigned thinking; ``deepseek``, ``zai``: system messages), then where thinking may stand and
whether the request may have it (``THINKING_RULES``): altered thinking of the latest message is put back as remembered
first, trailing thinking goes before the order is judged, the order before AM-9 looks at the first block, and AM-11
last, so it judges the request as it will be sent. TM515 runs after them all: it puts a message in front, which would
move every position the others visit. Each rule is one module with ``RULE``, a Bad/Good docstring (one message a
line) and ``apply(ctx)``; ``edit.py`` and ``thinking.py`` hold what they share.
"""

from proxy.dialects.messages.rules import (
    altered_thinking,
    content_after_tool_use,
    empty_text,
    empty_thinking,
    leading_assistant,
    non_object_input,
    stream_keys,
    system_message,
    thinking_disabled,
    thinking_not_first,
    thinking_required,
    tool_use_id,
    trailing_thinking,
    unsigned_thinking,
)
from proxy.repair.rule import RepairRule

BLOCK_RULES: tuple[RepairRule, ...] = (stream_keys, non_object_input, empty_text, empty_thinking)

THINKING_RULES: tuple[RepairRule, ...] = (altered_thinking, trailing_thinking, content_after_tool_use, thinking_not_first, thinking_required,
                                          thinking_disabled)

#: Every Messages rule, in the order they run (TM501 over the view; TM506 is the ``anthropic`` profile's, TM514 the
#: ``deepseek`` and ``zai`` profiles'): what the rule catalogue lists. TM512 (lone surrogates, ``surrogates.py``) mends
#: the raw body, before any of them; TM513 (``refused_signature.py``) runs on no request as the client sent it, only on
#: the upstream's refusal of a thinking signature (``plan.retried``).
RULES: tuple[RepairRule, ...] = (tool_use_id, *BLOCK_RULES, unsigned_thinking, system_message, *THINKING_RULES, leading_assistant)
