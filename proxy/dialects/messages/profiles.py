"""What each kind of Messages server wants of a history, named like the route's profile.

Every Anthropic-compatible server pairs results positionally (the next user message, ``tool_result`` blocks
first), so results are adjacent everywhere. Where they differ is unsigned thinking: Anthropic refuses a thinking
block without a signature (AM-15), while Kimi's and DeepSeek's Anthropic endpoints sign nothing and want their
thinking kept on the tool-call turns (Kimi requires it). And only Anthropic reads a ``role: "system"`` message inside
``messages`` (OT-1): DeepSeek's, Kimi's and Z.AI's endpoints refuse it, so there it goes into the top-level ``system``.
So a route whose profile is ``deepseek`` (the chat profile for DeepSeek and Kimi hosts) or ``zai`` keeps unsigned
thinking and folds system messages, and every other route (``anthropic``, ``openai``, anything) is held to
Anthropic's rule: a history without unsigned thinking is accepted by all of them.

No length rule is known for ``tool_use`` ids, so the chat id-length rule (TM208) is not run for Messages and
``max_id_length`` is no limit.
"""

import sys

from proxy.dialects.messages.rules import PIPELINE
from proxy.repair.profile import Profile

ANTHROPIC = Profile("anthropic", "Anthropic's Messages API: unsigned thinking removed (AM-15)", PIPELINE.profile_rules("anthropic"),
                    adjacent_results=True, max_id_length=sys.maxsize)
COMPATIBLE = Profile("deepseek", "Kimi and DeepSeek Anthropic-compatible endpoints: their unsigned thinking kept, system messages folded",
                     PIPELINE.profile_rules("deepseek"), adjacent_results=True, max_id_length=sys.maxsize)
ZAI = Profile("zai", "Z.AI's Anthropic-compatible endpoint: unsigned thinking kept, system messages folded",
              PIPELINE.profile_rules("zai"), adjacent_results=True, max_id_length=sys.maxsize)

_COMPATIBLE = {profile.name: profile for profile in (COMPATIBLE, ZAI)}


def messages_profile(name: str) -> Profile:
    """The Messages profile for a route's profile name: ``deepseek`` and ``zai`` keep unsigned thinking and fold system
    messages, any other is Anthropic's."""
    return _COMPATIBLE.get(name, ANTHROPIC)
