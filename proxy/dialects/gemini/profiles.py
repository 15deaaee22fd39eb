"""What each kind of Gemini server wants of a history, named like the route's profile.

Both pair responses with calls by position (the content right after a call content holds one response per call),
so responses are adjacent everywhere. Where they differ is ids (GN-9), which the request's endpoint family tells
(``target.GeminiTarget``); the profile names which family a route's upstream is when the path does not say it. No
length rule is known for Gemini call ids, so ``max_id_length`` is no limit.
"""

import sys

from proxy.repair.profiles import Profile

GEMINI = Profile("gemini", "Gemini Developer API (generativelanguage.googleapis.com): ids kept", adjacent_results=True,
                 max_id_length=sys.maxsize, hosts=("generativelanguage.googleapis.com",))
VERTEX = Profile("vertex", "Vertex AI (aiplatform.googleapis.com): ids removed before Gemini 3", adjacent_results=True,
                 max_id_length=sys.maxsize, hosts=("aiplatform.googleapis.com",))

PROFILES = {profile.name: profile for profile in (GEMINI, VERTEX)}


def gemini_profile(name: str) -> Profile:
    """The Gemini profile for a route's profile name: ``vertex`` is Vertex AI's, any other the Developer API's."""
    return PROFILES.get(name, GEMINI)
