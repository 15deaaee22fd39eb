"""What each kind of Responses server wants of a history, named like the route's profile.

OpenAI (and Azure) take an output anywhere after its call (other items may stand between them); DeepSeek's
``/v1/responses`` rejects any item between a call and its output (RS-17) and Kimi's translates to chat, so
it wants the chat order too (RS-18). Servers nobody has measured are held to the stricter order: a history
with each output right after its call is accepted by every server. Ids may be 64 characters long (RS-14).
"""

from functools import cache

from proxy.repair.profile import Profile

MAX_ID_LENGTH = 64

OPENAI = Profile("openai", "OpenAI and Azure Responses: an output anywhere after its call", adjacent_results=False, max_id_length=MAX_ID_LENGTH)


@cache
def responses_profile(name: str) -> Profile:
    """The Responses profile for a route's profile name: ``openai`` (and ``openrouter``, whose chat profile only concerns
    chat histories: its Responses API keeps OpenAI's order), else each output right after its call."""
    if name in (OPENAI.name, "openrouter"):
        return OPENAI
    return Profile(name, "Responses servers that want each output right after its call (DeepSeek, Kimi: RS-17, RS-18)",
                   adjacent_results=True, max_id_length=MAX_ID_LENGTH)
